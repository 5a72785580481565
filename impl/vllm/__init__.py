"""vLLM's Kimi-K3 image path run for real on a CPU (a second engine under test, served vs trained).

==========  ==========================================================================
module      what it holds
==========  ==========================================================================
shims       functional stand-ins for what the path needs of transformers at run time
sources     vLLM as an `impl.loader` engine; `load(spec)`: the parser and the Kimi-K3
            path imported for real, the served processor class read off the code
driver      `VLLMPath`: what vLLM serves (pixels, grids, prompt tokens, geometry)
==========  ==========================================================================
"""
