"""Tests of the vLLM driver (impl/vllm) on a cached release wheel."""
