"""The GPU check kit: every CUDA path verified on a GPU machine without internet, in commands that each fit a
short job, with every finished result brought home; and a CPU dry run of the same code that the tests run.

    make gpu-wheels     # here: the wheels the GPU image lacks into .whl/ (CPython 3.12), and
                        # .whl/provenance.json (this tree's commit, and whether it is dirty: .git does
                        # not travel)
    python3 -m hpml_lab.gpu plan           # the commands to run (at most 2), with estimates; --json: basis
    python3 -m hpml_lab.gpu run --part N --limit S   # on the GPU machine, from the tree's root (no make)
    python3 -m hpml_lab.gpu run --units c1,bench --device cpu    # the dry run of some units here
    python3 -m hpml_lab.gpu unpack DIR     # here: every archive that came home, merged

A command installs the carried wheels privately (pip --target, no index), records the machine
(node-part<N>.json: nvidia-smi, /dev/shm, versions, make, gcc, Python.h), then runs its units one by one: the
CUDA tests, the benchmarks, the lab tasks. Outputs go under reports/gpu/<gpu-name>/; after every unit the
folder's new files are packed into $OUT/<gpu-name>.part<N>.tar.gz (rewritten; where one archive would pass 16
MiB, also <gpu-name>.part<N>-2.tar.gz and on, within $OUT's 8 files; traces only where room is left; anything
that fits none is named in the manifest's `left_out_of_archive`), so a command killed at its limit brings home
every unit it finished. A unit whose `ok` came home is skipped (`--rerun a,b`: run them again). A command
learns what came home only from reports/gpu/<gpu-name>/manifest.json in the tree it carries: unpack the
archives into the tree before sending the next command. After its own units, every command goes on down the
check's other units that did not come home, in priority order, each only if its estimate fits the time left of
its `--limit`; at the limit it stops itself as a job's time limit would (SIGTERM: the unit it cut off is
recorded as interrupted, the rest packed). `unpack` merges any number of archives, in any order and in any
number of calls, into one manifest.json and one reports/index.html per GPU, each unit's pages from the record
the manifest keeps.

| module | holds |
|---|---|
| wheels | the wheels the node's image lacks: listed, fetched, installed privately; the tree's commit |
| node | the machine's record and the units a command runs (CUDA tests, benchmarks, lab tasks) |
| run | one command: its units in order, each recorded and packed as it ends, the rest as its limit allows |
| pack | a folder's new files into archives within the device tool's limits |
| unpack | archives that came home checked whole, then merged into one manifest and index per GPU |
| manifest | a manifest read as possibly hostile: its shape and every path it lists checked, else one line |
| __main__ | the command line: `python3 -m hpml_lab.gpu wheels / plan / run / unpack` |
"""
