"""The library's ``tests/reliability`` fixtures, for the lab's tests of the same folder."""

from lab_fixtures import library_fixtures

globals().update(library_fixtures("reliability"))
