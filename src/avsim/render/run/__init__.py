"""Run layer: a render request resolved into a plan, run by a pool of workers, resumed and written.

`plan` (typed options and plans), `runner` (`run_render`: the library entry point of `avsim
render`), `pool` (time segments rendered once and fed to every encoder), `memory` (the per-process
memory budget), `resume` (content digests of finished outputs), `writer` (videos, PNGs, mosaic,
overlays), `real_frames` and `overlay` (`--overlay`) and `labels` (labels in the render pass and
`avsim labels`).
"""
