"""The library's ``tests/core`` fixtures, for the lab's tests of the same folder."""

from lab_fixtures import library_fixtures

globals().update(library_fixtures("core"))
