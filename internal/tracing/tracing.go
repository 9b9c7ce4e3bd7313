// Package tracing sets up OpenTelemetry tracing for a Tether process: off
// (a no-op provider, no exporter, no goroutine) unless an OTLP endpoint is
// configured with the standard OTEL_* variables, and then an SDK provider
// that exports spans in batches over OTLP/HTTP (or gRPC).
//
// The process's own getenv decides whether tracing is on and where spans
// go: OTEL_SDK_DISABLED, OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT,
// OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL, OTEL_SERVICE_NAME and
// OTEL_BSP_SCHEDULE_DELAY are read through it and passed to the SDK as
// options, so a test that hands run its own environment gets what it set.
// The other standard variables (headers, timeout, certificate, compression,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER and its argument, the other
// OTEL_BSP_* limits) are read by the SDK from the process environment, as
// every OpenTelemetry SDK does; in a deployed process that is the same
// environment.
//
// Tether never sets the global tracer provider: each process passes its
// provider's tracer to the packages that make spans, so two processes in one
// test binary (a gateway and a runner) keep their own service names.
package tracing

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Off is the provider of a process without tracing: its spans record
// nothing and cost next to nothing.
var Off trace.TracerProvider = noop.NewTracerProvider()

// InstrumentationName names Tether's tracers.
const InstrumentationName = "github.com/tether-dev/tether"

// Start returns the tracer provider of the process named service (the
// default of OTEL_SERVICE_NAME) and the function that flushes and stops it,
// to be called on the way out with a bounded context. Without an endpoint,
// or with OTEL_SDK_DISABLED=true, it returns Off and a shutdown that does
// nothing. A bad value of one of the variables it reads is an error naming
// it.
//
// A collector that is down never holds up a request: spans go to a bounded
// queue that a goroutine exports, full queues drop spans, and export errors
// are logged (at most once a minute), not returned.
func Start(ctx context.Context, service string, getenv func(string) string, log *slog.Logger) (trace.TracerProvider, func(context.Context) error, error) {
	nothing := func(context.Context) error { return nil }
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return Off, nothing, nil
	}
	endpoint, signal := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), true
	if endpoint == "" {
		endpoint, signal = getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), false
	}
	if endpoint == "" {
		return Off, nothing, nil
	}
	name := "OTEL_EXPORTER_OTLP_ENDPOINT"
	if signal {
		name = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, nil, fmt.Errorf("%s=%q: want a URL such as http://collector:4318", name, endpoint)
	}
	protocol := cmp.Or(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "http/protobuf")

	var client otlptrace.Client
	switch protocol {
	case "http/protobuf":
		// The signal variable is the whole URL; the generic one is a base
		// that the signal's path is appended to (OTLP exporter spec).
		if !signal {
			u = u.JoinPath("v1/traces")
		}
		client = otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(u.String()))
	case "grpc":
		client = otlptracegrpc.NewClient(otlptracegrpc.WithEndpointURL(u.String()))
	default:
		return nil, nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: want http/protobuf or grpc", protocol)
	}

	var bsp []sdktrace.BatchSpanProcessorOption
	if v := getenv("OTEL_BSP_SCHEDULE_DELAY"); v != "" {
		ms, err := time.ParseDuration(v + "ms")
		if err != nil || ms < 0 {
			return nil, nil, fmt.Errorf("OTEL_BSP_SCHEDULE_DELAY=%q: want milliseconds", v)
		}
		bsp = append(bsp, sdktrace.WithBatchTimeout(ms))
	}

	// Later detectors win: Tether's name for the process, then the
	// environment's (OTEL_RESOURCE_ATTRIBUTES, then OTEL_SERVICE_NAME).
	detect := []resource.Option{
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	}
	if name := getenv("OTEL_SERVICE_NAME"); name != "" {
		detect = append(detect, resource.WithAttributes(attribute.String("service.name", name)))
	}
	res, err := resource.New(ctx, detect...)
	if err != nil {
		// A malformed OTEL_RESOURCE_ATTRIBUTES: the rest of the resource is
		// still good.
		log.Warn("tracing: resource attributes", "err", err)
	}
	// otlptrace.New connects lazily: an exporter for a collector that is
	// down is made at once and fails only its exports.
	exp, err := otlptrace.New(ctx, client)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: OTLP exporter for %s: %w", endpoint, err)
	}
	installErrorLog(log)
	// The sampler is the SDK's default, which honours OTEL_TRACES_SAMPLER
	// (parentbased_always_on when unset).
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, bsp...),
		sdktrace.WithResource(res),
	)
	log.Info("tracing on", "endpoint", redact(u), "protocol", protocol)
	return tp, tp.Shutdown, nil
}

// redact is the endpoint without a password, for the log.
func redact(u *url.URL) string { return u.Redacted() }

// The SDK reports export failures to the process-wide error handler. The
// first one is logged at once and the rest at most once a minute, with a
// count, so a collector that is down for a day does not flood the log.
var (
	errorLogOnce sync.Once
	errorLog     = &throttledLog{every: time.Minute}
)

func installErrorLog(log *slog.Logger) {
	errorLogOnce.Do(func() {
		errorLog.log = log
		otel.SetErrorHandler(errorLog)
	})
}

type throttledLog struct {
	every time.Duration

	mu         sync.Mutex
	log        *slog.Logger
	last       time.Time
	suppressed int
}

func (l *throttledLog) Handle(err error) {
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	log := l.log
	l.mu.Unlock()
	log.Warn("tracing: spans not exported (dropped; requests are not affected)", "err", err, "errors_since_last_log", n)
}
