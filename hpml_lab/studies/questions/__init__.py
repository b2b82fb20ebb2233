"""The questions task: its study and what its report concludes."""
