# A "torch" of another version than the image's, so that a pin on it has something to resolve to:
# trainpoint must refuse it before installing anything (it holds no PyTorch).
from setuptools import setup

setup(name="torch", version="9.9.9", packages=["torch"])
