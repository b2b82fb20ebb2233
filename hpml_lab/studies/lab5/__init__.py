"""The lab5 task: its study and what its report concludes."""
