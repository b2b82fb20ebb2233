"""The top layer: tasks and their notebooks, papermill execution and HTML rendering, the helpers the
notebooks call, Slurm scripts and the `hpml-lab` command (the figures: hpml_lab/plots.py and each task
folder's figure.py).

    hpml-lab tasks | run TASK | report | slurm TASK | overlay | data ... | bench ...   (report/cli.py)

| module | holds |
|---|---|
| tasks | the one list of tasks: id, notebook, title, parameter profiles |
| runner | parameter checks, papermill, nbconvert, reports/index.html |
| kernel | the kernel a notebook runs in: its sockets, its environment, the signals that stop it |
| watch | what a run prints while it runs: a line per task with its time, what is left, a heartbeat |
| pages | how the pages look: one type and table style, the answer box after the title, headlines first |
| notebook | what a notebook calls, as nb.<name>: config, the CPU time notice; the next three re-exported |
| page_record | what the page shows, held in its answer record: tables, figures' labels, Numbers; the record |
| displays | the page's displays: header, data and settings notices, environment table, artifacts, memory |
| figures | figures saved and shown with their alt text and caption, held in the page's record |
| slurm | sbatch scripts for a task |
| overlay | the script that fills an Apptainer overlay with hpml-lab's environment and kernel |
| written | job scripts and tables written for a person: an edited one is never replaced without a word |
| dataprep | the default synthetic data made where a task needs it; `data synth`'s progress lines |
| cli | the `hpml-lab` command |
| guards | checks before a kernel starts; a report's files replaced as one set |
| answer_box | the answer record: every number tagged measured, predicted or reference |
| claims | the claims check: every number a page states is in its record, every comparison names its verdict |
| bundle | the one-file hand-in (HTML, PDF with Chromium) |
| gpuplan | the GPU check kit's stages and their time estimates (the kit itself: hpml_lab/gpu/) |
"""
