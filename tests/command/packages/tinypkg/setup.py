from setuptools import setup

setup(name="tinypkg", version="1.0", packages=["tinypkg"])
