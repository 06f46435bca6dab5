"""Teams: analysts who share research. A team has members, some of them its owners."""
