"""Foundation every stage stands on: errors, exit codes, judgement (every threshold), formatting, files, the variant registry."""
