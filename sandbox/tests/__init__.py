"""The sandbox's own tests: its stand-ins, its test kit, its demo."""
