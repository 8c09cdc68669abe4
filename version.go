package queen

// Version is the version of this module, reported by the standalone
// server's -version flag and by httpapi's GET /health. It follows semantic
// versioning; before 1.0 a minor release may change the API (CHANGELOG.md
// says what changed).
const Version = "0.2.0"
