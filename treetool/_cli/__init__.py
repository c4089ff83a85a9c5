"""The `treetool` command's parts: commands, targets, file facts, JSON, progress, the live app.

Modules:
    _commands: The `treetool` commands (`inspect`, `ls`, `get`, `summary`, `diff`, `demo`).
    _demo: The built-in example of `treetool demo`: a small equinox transformer and its adamw state.
    _files: What the CLI says about the files it reads: steps, structure-less files, file facts.
    _json: `--json` output of the `treetool` commands: the leaf listing and the JSON printer.
    _live: `treetool inspect BIG.pkl` on a terminal: the app opens at once and reads the file itself.
    _port: `treetool port SOURCE TARGET`: the plan that maps a checkpoint onto a model, and its proof.
    _progress: A progress line on stderr for remote reads that take longer than a second (CLI only).
    _sides: The two sides of `treetool diff`: a `--like` skeleton, a live side, two remote reads.
    _target: What a command read (`Target`), its one error (`CliError`) and its exit codes.
    _targets: What a `treetool` command reads: `FILE`, `DIR`, `RUN@STEP`, `module:attr`, `--args` specs.
"""
