"""What every shell's command does before its shell runs (upstream ``cmd/kube-scheduler/app``):
load plugins and configuration, turn bad input into one clear line, render an explanation.

Shell modules import this package; it imports no shell. ``cli.py`` sits on top of all of them."""
