"""A package the test programs import from their requirements' environment."""
VALUE = 7
