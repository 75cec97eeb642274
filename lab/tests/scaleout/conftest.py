"""The library's ``tests/scaleout`` fixtures, for the lab's tests of the same folder."""

from lab_fixtures import library_fixtures

globals().update(library_fixtures("scaleout"))
