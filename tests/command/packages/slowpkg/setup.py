# An sdist whose build waits while $SLOWPKG_HOLD exists, after creating $SLOWPKG_HOLD.started, so
# that a test can kill trainpoint in the middle of an environment's build. It stops waiting when pip
# (its parent) is gone.
import os
import sys
import time

from setuptools import setup

hold = os.environ.get("SLOWPKG_HOLD", "")
if hold and ("bdist_wheel" in sys.argv or "install" in sys.argv):
    open(hold + ".started", "w").close()
    parent = os.getppid()
    deadline = time.time() + 60
    while os.path.exists(hold) and os.getppid() == parent and time.time() < deadline:
        time.sleep(0.05)
setup(name="slowpkg", version="1.0", py_modules=["slowpkg"])
