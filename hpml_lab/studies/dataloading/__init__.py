"""The dataloading task: its study and what its report concludes."""
