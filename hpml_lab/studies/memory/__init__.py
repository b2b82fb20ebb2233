"""The memory task: its study and what its report concludes."""
