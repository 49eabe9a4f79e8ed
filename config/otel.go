package config

import "net/url"

// OTel configures OpenTelemetry traces (the otel key): off unless
// Endpoint is set.
type OTel struct {
	// Endpoint is the base URL of an OTLP/HTTP collector
	// (http://collector:4318); spans are POSTed as JSON to
	// Endpoint/v1/traces.
	Endpoint string `yaml:"endpoint" secret:"url"`
	// ServiceName is the service.name of the spans (default "pibot").
	ServiceName string `yaml:"service_name"`
}

// validate checks otel.*; every problem names its key.
func (o OTel) validate(bad func(key, format string, args ...any)) {
	if o.Endpoint == "" {
		return
	}
	u, err := url.Parse(o.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		bad("otel.endpoint", "%q must be the http(s) base URL of an OTLP/HTTP collector, e.g. http://localhost:4318", o.Endpoint)
	}
}
