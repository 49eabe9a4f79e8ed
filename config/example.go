package config

import _ "embed"

// Example is config.example.yaml: every key, documented.
//
//go:embed config.example.yaml
var Example string
