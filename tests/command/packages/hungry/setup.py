# Pins torch transitively: installing it would replace the image's torch.
from setuptools import setup

setup(name="hungry", version="1.0", packages=["hungry"], install_requires=["torch>=9"])
