package runtime

// SupportPackageIsVersion1 is referenced by generated code so that a file
// generated for a runtime this package no longer supports fails to compile
// with a message that names the mismatch. It is never removed; a new version
// is added beside it.
const SupportPackageIsVersion1 = true
