"""What the user gave, read and checked into typed inputs: settings, model, data, labels, tasks, user code."""
