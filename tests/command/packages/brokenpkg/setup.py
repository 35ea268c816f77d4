# An sdist whose metadata is fine but whose build fails, as a package without a wheel for this
# platform and a failing compiler would.
import sys

from setuptools import setup

if "bdist_wheel" in sys.argv or "install" in sys.argv:
    sys.exit("brokenpkg: this package does not build here")
setup(name="brokenpkg", version="1.0", py_modules=[])
