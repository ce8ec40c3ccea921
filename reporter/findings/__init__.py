"""What the measurements mean, decided: findings, notices, picks, the gate, two runs compared."""
