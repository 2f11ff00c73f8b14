"""Files and streams in and out: CSV and input files, command-line arguments, run outputs, publishing
artifacts whole, choosing among attached copies of artifacts, process memory, wheels."""
