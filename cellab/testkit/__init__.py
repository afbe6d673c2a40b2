"""What the tests and benches share: helpers to run the CLI and read result folders, fuzzing strategies, the extended tests' runner."""
