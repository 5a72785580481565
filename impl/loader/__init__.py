"""Run another project's code on a CPU, and record every stand-in: the engine-agnostic loader.

A driver describes its engine once (`engine.Engine`) and gets a `sources.Source`
from ``sources.load(engine, spec)`` (or composes the steps itself). Nothing here
names an engine; the drivers (``impl/sglang``) import this package, never the
other way round.

==============  =========  ===============================================================
module          layer      what it holds
==============  =========  ===============================================================
engine          describe   `Engine` (names, checkout layout, required modules, wording),
                           `SourceError`, `FetchError`, `FETCH_FAILED`
provenance      record     `StandIn` / `Records` (every module not the real thing),
                           `describe` (what ran, for a report)
standins        stand in   stand-in classes and modules; `end_import_phase`,
                           `StandInUsedError` once a stand-in is called at run time
release_files   vouch      what a release folder holds beside its tree: the wheel's RECORD
                           and METADATA verbatim, ``deferlab-source.json``, the kept wheel
wheels          fetch      ``pip download --no-deps`` into ``~/.cache/deferlab/<name>/``,
                           atomic, the wheel kept; `DownloadError`; ``DEFERLAB_OFFLINE``
bytecode        compile    compiled engine files kept by content (``<cache>/bytecode``)
guards          read       which import statements of an engine file are guarded
                           (``try ... except ImportError``), from its text
integrity       check      a cached release against its wheel's RECORD, stamped; mended
                           from the kept wheel (or fetched again) where it differs
importer        import     `Importer`: bare packages, guarded module bodies, stand-ins only
                           for unguarded imports, never for the engine's own Python;
                           `RequiredImportError`, `IncompleteTreeError`
companions      pin        the libraries a release pins (transformers, torchvision): its
                           METADATA's ``Requires-Dist``, the newest satisfying release,
                           fetched and verified like a wheel, imported ahead of any
                           installed copy; `TRANSFORMERS`, `TORCHVISION`, `KNOWN`
patching        patch      ``--patch FILE``: a unified diff applied to a copy of the tree (never the
                           cache), named in the source's name and provenance; `PATCH_ENV`, `MARK`
resolution      resolve    ``installed`` / a checkout / a version -> `Resolved`, nothing
                           imported
sources         load       `Source`; one tree per engine per process; `load` (with
                           companions)
cache           manage     what ``deferlab cache`` lists and prunes (releases, bytecode)
==============  =========  ===============================================================

Imports point up this table only (``sources`` uses everything above it).
"""
