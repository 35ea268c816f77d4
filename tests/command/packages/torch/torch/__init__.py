"""Not PyTorch: a stand-in version 9.9.9 that must never be installed."""
