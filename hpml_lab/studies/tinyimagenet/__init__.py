"""The tinyimagenet task: its study and what its report concludes."""
