"""LMDeploy's room: its PyTorch engine's block managers under differential test (:mod:`.backend`), how
they are loaded alone on every release (:mod:`.compat`), its release matrix (:mod:`.matrix`). Nothing
here imports LMDeploy at swafloor's import; see docs/lmdeploy.md."""
