package config

import (
	"log/slog"
	"net/netip"
	"strconv"
	"time"

	"github.com/tether-dev/tether/internal/engine"
	"github.com/tether-dev/tether/internal/gateway"
	"github.com/tether-dev/tether/internal/jwks"
	"github.com/tether-dev/tether/internal/maintenance"
	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/runner"
	"github.com/tether-dev/tether/internal/task"
	"github.com/tether-dev/tether/internal/uploads"
)

// Config holds every setting of the gateway and the runner, typed. Load
// fills the fields of the component it loads for; the others keep their
// zero values.
type Config struct {
	Addr         string
	DatabaseURL  string
	NATSURL      string
	NATSListen   string
	NATSReplicas int
	DataDir      string
	AuthSecret   string
	JWTAudience  string
	JWTIssuer    string
	// JWKSURLs are identity providers' JWK Set endpoints; JWKSRefresh and
	// JWKSUnknownKIDEvery say how often they are fetched.
	JWKSURLs            []string
	JWKSRefresh         time.Duration
	JWKSUnknownKIDEvery time.Duration
	SessionKey          string
	SessionTTL          time.Duration
	CursorKey           string
	AllowedOrigins      []string
	TrustedProxies      []netip.Prefix

	Rate             float64
	ConnRate         float64
	MaxTabsPerUser   int
	MaxSubscriptions int
	MaxPending       int
	QueueBytes       int
	IdleTimeout      time.Duration
	MaxRetries       int

	MaxUpload int
	UploadDir string
	UploadTTL time.Duration
	// UploadS3* put the bytes of uploads in a bucket instead of UploadDir.
	UploadS3Bucket    string
	UploadS3Endpoint  string
	UploadS3Region    string
	UploadS3Prefix    string
	UploadS3PathStyle string // auto, true or false

	Engine                  string
	OpenAIBaseURL           string
	OpenAIAPIKey            string
	OpenAIModel             string
	OpenAISystemPrompt      string
	OpenAITemperature       *float64
	OpenAIMaxTokens         int
	OpenAIContextBudget     int
	OpenAITimeout           time.Duration
	OpenAIFirstTokenTimeout time.Duration
	OpenAIContinue          string
	RunnerID                string
	Concurrency             int
	ResultInlineMax         int
	DrainTimeout            time.Duration

	IdempotencyTTL      time.Duration
	PendingTimeout      time.Duration
	Lease               time.Duration
	MaxAttempts         int
	ConnectTimeout      time.Duration
	Migrate             bool
	MigrateTimeout      time.Duration
	StatementTimeout    time.Duration
	LockTimeout         time.Duration
	RequestTimeout      time.Duration
	ClaimTimeout        time.Duration
	PackDeltas          bool
	MaintenanceTimeout  time.Duration
	MaintenanceInterval time.Duration
	LogLevel            slog.Level
	PprofAddr           string
	LogGrace            time.Duration
	LogMaxBytes         int
}

// settings declares every setting once: its variable, flag, users, type
// (through the parser bound to its field), default and meaning. The README's
// configuration table is made from this list (TestReadmeTable holds them
// equal), so a setting added here is documented there.
func (c *Config) settings() []setting {
	const both = Gateway | Runner
	return []setting{
		{env: "TETHER_ADDR", flag: "addr", users: Gateway, def: ":8080",
			doc:   "HTTP and WebSocket listen address",
			value: str(&c.Addr)},
		{env: "DATABASE_URL", flag: "database-url", users: both, secret: true,
			defDoc: "unset: `make run` starts a private Postgres (it prints where)",
			doc:    "Postgres URL; required",
			value:  str(&c.DatabaseURL)},
		{env: "NATS_URL", flag: "nats-url", users: both, secret: true, runnerDef: "nats://" + natsbus.DefaultListen,
			defDoc: "gateway: embedded; runner: `nats://" + natsbus.DefaultListen + "`",
			doc:    "external NATS (a password in it is never printed)",
			value:  str(&c.NATSURL)},
		{env: "TETHER_NATS_LISTEN", flag: "nats-listen", users: Gateway, def: natsbus.DefaultListen,
			doc:   "embedded NATS client address",
			value: str(&c.NATSListen)},
		{env: "TETHER_NATS_REPLICAS", flag: "nats-replicas", users: both, def: strconv.Itoa(natsbus.DefaultReplicas),
			doc:   "servers of a NATS cluster that keep each stream: `3` for the cluster of `nats.conf` ([docs/deploy.md](docs/deploy.md))",
			value: integer(&c.NATSReplicas, 1, 5)},
		{env: "TETHER_DATA_DIR", flag: "data-dir", users: Gateway, def: ".data",
			doc:   "embedded JetStream storage, the anonymous session key",
			value: str(&c.DataDir)},
		{env: "TETHER_AUTH_SECRET", flag: "auth-secret", users: Gateway, secret: true,
			defDoc: "unset: anonymous cookie mode, unless `TETHER_JWT_JWKS_URL` is set (logged as a warning)",
			doc:    "HS256 secret for JWTs (`sub`, numeric `exp`), at least 32 bytes",
			value:  secretStr(&c.AuthSecret, 32)},
		{env: "TETHER_JWT_JWKS_URL", flag: "jwt-jwks-url", users: Gateway,
			defDoc: "unset: no identity provider",
			doc:    "comma-separated JWK Set URLs of identity providers (Auth0, Clerk, Supabase, Keycloak, Cognito, Firebase): RS/PS/ES/EdDSA JWTs are verified by the key their `kid` names; with `TETHER_AUTH_SECRET` too, HS256 tokens still use the secret ([docs/deploy.md](docs/deploy.md#sign-in-with-an-identity-provider))",
			value:  urls(&c.JWKSURLs)},
		{env: "TETHER_JWT_JWKS_REFRESH", flag: "jwt-jwks-refresh", users: Gateway, def: dur(jwks.DefaultRefresh),
			doc:   "how often each JWK Set is fetched again in the background",
			value: duration(&c.JWKSRefresh)},
		{env: "TETHER_JWT_JWKS_UNKNOWN_KID_EVERY", flag: "jwt-jwks-unknown-kid-every", users: Gateway, def: dur(jwks.DefaultUnknownKIDEvery),
			doc:   "a token whose `kid` no cached set has fetches the sets again, at most once per this however many such tokens come; still unknown, it is `unauthorized` (`unavailable` while a set cannot be fetched)",
			value: duration(&c.JWKSUnknownKIDEvery)},
		{env: "TETHER_JWT_AUDIENCE", flag: "jwt-audience", users: Gateway,
			defDoc: "unset: not checked",
			doc:    "a JWT's `aud` must contain this",
			value:  str(&c.JWTAudience)},
		{env: "TETHER_JWT_ISSUER", flag: "jwt-issuer", users: Gateway,
			defDoc: "unset: not checked",
			doc:    "a JWT's `iss` must equal this",
			value:  str(&c.JWTIssuer)},
		{env: "TETHER_SESSION_KEY", flag: "session-key", users: Gateway, secret: true,
			defDoc: "a random key kept in `TETHER_DATA_DIR/session.key`",
			doc:    "signs anonymous session cookies (at least 32 bytes), and page cursors when there is no `TETHER_AUTH_SECRET`; give every gateway the same one",
			value:  secretStr(&c.SessionKey, 32)},
		{env: "TETHER_SESSION_TTL", flag: "session-ttl", users: Gateway, def: dur(gateway.DefaultSessionTTL),
			doc:   "an anonymous cookie expires this long after it was last renewed (renewed daily while used)",
			value: duration(&c.SessionTTL)},
		{env: "TETHER_CURSOR_KEY", flag: "cursor-key", users: Gateway, secret: true,
			defDoc: "derived (HKDF) from `TETHER_AUTH_SECRET`, or else from the session key",
			doc:    "signs page cursors; every gateway of one database needs the same",
			value:  secretStr(&c.CursorKey, 32)},
		{env: "TETHER_ALLOWED_ORIGINS", flag: "allowed-origins", users: Gateway,
			defDoc: "the gateway's own host",
			doc:    "comma-separated exact origins allowed for WebSocket upgrades, cookie writes and CORS (section 11); set, it replaces the default, so list the gateway's own origin too",
			value:  list(&c.AllowedOrigins)},
		{env: "TETHER_TRUSTED_PROXIES", flag: "trusted-proxies", users: Gateway,
			defDoc: "none",
			doc:    "comma-separated CIDRs whose `X-Forwarded-For` / `X-Forwarded-Proto` are believed",
			value:  prefixes(&c.TrustedProxies)},
		{env: "TETHER_RATE", flag: "rate", users: Gateway, def: "20",
			doc:   "client messages and HTTP requests per second per user (burst twice that); `0` = no limit",
			value: float(&c.Rate, 0)},
		{env: "TETHER_CONN_RATE", flag: "conn-rate", users: Gateway, def: "20",
			doc:   "new connections per second per client IP (burst twice that); beyond it 429; `0` = no limit",
			value: float(&c.ConnRate, 0)},
		{env: "TETHER_MAX_TABS_PER_USER", flag: "max-tabs-per-user", users: Gateway, def: strconv.Itoa(gateway.DefaultMaxTabsPerUser),
			doc:   "open WebSocket and SSE connections per user on one gateway; beyond it 429",
			value: integer(&c.MaxTabsPerUser, 1, 1<<20)},
		{env: "TETHER_MAX_SUBSCRIPTIONS", flag: "max-subscriptions", users: Gateway, def: strconv.Itoa(gateway.DefaultMaxSubscriptions),
			doc:   "tasks one tab may follow at once; beyond it `rate_limited`",
			value: integer(&c.MaxSubscriptions, 1, 1<<20)},
		{env: "TETHER_MAX_PENDING", flag: "max-pending", users: Gateway, def: strconv.Itoa(gateway.DefaultMaxPending),
			doc:   "requests of one tab waiting or running (cancels included); beyond it `rate_limited`",
			value: integer(&c.MaxPending, 1, 1<<16)},
		{env: "TETHER_TAB_QUEUE_BYTES", flag: "tab-queue-bytes", users: Gateway, def: strconv.Itoa(gateway.DefaultQueueBytes),
			doc:   "bytes queued for one tab (or buffered for one of its subscriptions) before it is closed 1013 (at least 1 MiB)",
			value: integer(&c.QueueBytes, 1<<20, 1<<30)},
		{env: "TETHER_IDLE_TIMEOUT", flag: "idle-timeout", users: Gateway, def: "60s",
			doc:   "an idle HTTP keep-alive connection is closed after this",
			value: duration(&c.IdleTimeout)},
		{env: "TETHER_MAX_RETRIES", flag: "max-retries", users: Gateway, def: strconv.Itoa(postgres.DefaultMaxRetries),
			doc:   "times a user may retry one failed task; beyond it `conflict`",
			value: integer(&c.MaxRetries, 1, 1<<20)},
		{env: "TETHER_MAX_UPLOAD", flag: "max-upload", users: Gateway, def: strconv.Itoa(uploads.DefaultMaxSize),
			doc:   "bytes of one upload (20 MiB); a larger `Upload-Length` is refused with 413 before a byte is stored",
			value: integer(&c.MaxUpload, 1, 1<<40)},
		{env: "TETHER_UPLOAD_DIR", flag: "upload-dir", users: Gateway,
			defDoc: "`TETHER_DATA_DIR/uploads`",
			doc:    "directory that keeps the bytes of uploads ([docs/deploy.md](docs/deploy.md#uploads-storage))",
			value:  str(&c.UploadDir)},
		{env: "TETHER_UPLOAD_S3_BUCKET", flag: "upload-s3-bucket", users: Gateway,
			defDoc: "unset: uploads stay in `TETHER_UPLOAD_DIR`",
			doc:    "keep the bytes of uploads in this bucket of an S3-compatible store (AWS S3, MinIO, versitygw, R2), shared by every gateway; credentials come from the usual AWS variables (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_PROFILE`, ...) ([docs/deploy.md](docs/deploy.md#uploads-in-an-s3-compatible-bucket))",
			value:  str(&c.UploadS3Bucket)},
		{env: "TETHER_UPLOAD_S3_ENDPOINT", flag: "upload-s3-endpoint", users: Gateway,
			defDoc: "unset: AWS S3",
			doc:    "URL of an S3-compatible store other than AWS, e.g. `http://minio:9000`; needs `TETHER_UPLOAD_S3_BUCKET`",
			value:  str(&c.UploadS3Endpoint)},
		{env: "TETHER_UPLOAD_S3_REGION", flag: "upload-s3-region", users: Gateway,
			defDoc: "unset: `AWS_REGION`, else `us-east-1`",
			doc:    "region of the bucket (R2: `auto`)",
			value:  str(&c.UploadS3Region)},
		{env: "TETHER_UPLOAD_S3_PREFIX", flag: "upload-s3-prefix", users: Gateway, def: "uploads/",
			doc:   "put before every object key; each upload is the objects under `<prefix><upload id>/`",
			value: str(&c.UploadS3Prefix)},
		{env: "TETHER_UPLOAD_S3_PATH_STYLE", flag: "upload-s3-path-style", users: Gateway, def: "auto",
			doc:   "address the bucket in the URL's path (`endpoint/bucket/key`), not its host name: `true`, `false`, or `auto` = `true` with `TETHER_UPLOAD_S3_ENDPOINT`, `false` without",
			value: choice(&c.UploadS3PathStyle, "auto", "true", "false")},
		{env: "TETHER_UPLOAD_TTL", flag: "upload-ttl", users: Gateway, def: dur(uploads.DefaultTTL),
			doc:   "an upload no message holds is removed, with its bytes, this long after its last byte arrived",
			value: duration(&c.UploadTTL)},
		{env: "TETHER_ENGINE", flag: "engine", users: Runner, def: engine.DefaultName,
			doc:   "`demo` or `openai` ([docs/engines.md](docs/engines.md))",
			value: str(&c.Engine)},
		{env: "TETHER_OPENAI_BASE_URL", flag: "openai-base-url", users: Runner, def: engine.DefaultOpenAIBaseURL,
			doc:   "`openai` engine: the API root, posted to at `{base}/chat/completions`; usually ends in `/v1` (Ollama: `http://127.0.0.1:11434/v1`)",
			value: str(&c.OpenAIBaseURL)},
		{env: "TETHER_OPENAI_API_KEY", flag: "openai-api-key", users: Runner, secret: true,
			defDoc: "unset: no `Authorization` header",
			doc:    "`openai` engine: sent as `Authorization: Bearer …`; never logged or shown in task errors",
			value:  secretStr(&c.OpenAIAPIKey, 0)},
		{env: "TETHER_OPENAI_MODEL", flag: "openai-model", users: Runner,
			defDoc: "unset: required with `TETHER_ENGINE=openai`",
			doc:    "`openai` engine: the model name the server knows (`gpt-4o-mini`, `llama3.2`, …)",
			value:  str(&c.OpenAIModel)},
		{env: "TETHER_OPENAI_SYSTEM_PROMPT", flag: "openai-system-prompt", users: Runner,
			defDoc: "unset",
			doc:    "`openai` engine: sent as the first (`system`) message of every request",
			value:  str(&c.OpenAISystemPrompt)},
		{env: "TETHER_OPENAI_TEMPERATURE", flag: "openai-temperature", users: Runner,
			defDoc: "unset: the server's",
			doc:    "`openai` engine: 0 to 2, sent only when set",
			value:  optFloat(&c.OpenAITemperature, 0, 2)},
		{env: "TETHER_OPENAI_MAX_TOKENS", flag: "openai-max-tokens", users: Runner, def: "0",
			doc:   "`openai` engine: caps an answer (`max_tokens`) and makes progress a real fraction; `0` = no cap (some reasoning models refuse `max_tokens`)",
			value: integer(&c.OpenAIMaxTokens, 0, 1<<30)},
		{env: "TETHER_OPENAI_CONTEXT_BUDGET", flag: "openai-context-budget", users: Runner, def: strconv.Itoa(engine.DefaultContextBudget),
			doc:   "`openai` engine: estimated tokens of earlier conversation sent with each request; negative = none",
			value: integer(&c.OpenAIContextBudget, -1<<30, 1<<30)},
		{env: "TETHER_OPENAI_TIMEOUT", flag: "openai-timeout", users: Runner, def: dur(engine.DefaultRequestTimeout),
			doc:   "`openai` engine: the most one answer may take, retries included",
			value: duration(&c.OpenAITimeout)},
		{env: "TETHER_OPENAI_FIRST_TOKEN_TIMEOUT", flag: "openai-first-token-timeout", users: Runner, def: dur(engine.DefaultFirstTokenTimeout),
			doc:   "`openai` engine: the most one request may wait for the first token (raise it for a server that loads models on first use)",
			value: duration(&c.OpenAIFirstTokenTimeout)},
		{env: "TETHER_OPENAI_CONTINUE", flag: "openai-continue", users: Runner, def: string(engine.ContinuePrefill),
			doc:   "`openai` engine: how an answer kept from a lost runner goes on: `prefill` asks the server to continue it, `restart` starts it over ([docs/engines.md](docs/engines.md#continuing-after-a-lost-runner))",
			value: choice(&c.OpenAIContinue, string(engine.ContinuePrefill), string(engine.ContinueRestart))},
		{env: "TETHER_IDEMPOTENCY_TTL", flag: "idempotency-ttl", users: both, def: dur(task.DefaultIdempotencyTTL),
			doc:   "how long a finished task's id stays taken",
			value: duration(&c.IdempotencyTTL)},
		{env: "TETHER_PENDING_TIMEOUT", flag: "pending-timeout", users: both, def: dur(task.DefaultPendingTimeout),
			doc:   "a task no runner claims this long fails with `no_runner`",
			value: duration(&c.PendingTimeout)},
		{env: "TETHER_LEASE", flag: "lease", users: both, def: dur(task.DefaultLease),
			doc:   "a runner that stops heart-beating this long loses its task to another attempt",
			value: duration(&c.Lease)},
		{env: "TETHER_MAX_ATTEMPTS", flag: "max-attempts", users: both, def: strconv.Itoa(task.DefaultMaxAttempts),
			doc:   "attempts before `runner_lost`",
			value: integer(&c.MaxAttempts, 1, 1000)},
		{env: "TETHER_RUNNER_CONCURRENCY", flag: "concurrency", users: Runner, def: strconv.Itoa(runner.DefaultConcurrency),
			doc:   "tasks one runner runs at once",
			value: integer(&c.Concurrency, 1, 1<<16)},
		{env: "TETHER_RUNNER_ID", flag: "id", users: Runner,
			defDoc: "hostname-pid",
			doc:    "the runner's name in leases and logs",
			value:  str(&c.RunnerID)},
		{env: "TETHER_RESULT_INLINE_MAX", flag: "result-inline-max", users: Runner, def: strconv.Itoa(postgres.DefaultResultInlineMax),
			doc:   "bytes of output kept in the task; a larger finished answer moves to a stored result (`result_ref`, `GET /v1/results/{ref}`); `-1` = never",
			value: integer(&c.ResultInlineMax, -1, 1<<30)},
		{env: "TETHER_DRAIN_TIMEOUT", flag: "drain-timeout", users: Runner, def: dur(runner.DefaultDrainTimeout),
			doc:   "on SIGTERM, how long running tasks may finish before they are left to another runner",
			value: duration(&c.DrainTimeout)},
		{env: "TETHER_LOG_GRACE", flag: "log-grace", users: both, def: "5m",
			doc:   "a finished task's events stay in the JetStream log this long (for a resume that comes late), then maintenance purges them; its snapshot has them all",
			value: duration(&c.LogGrace)},
		{env: "TETHER_LOG_MAX_BYTES", flag: "log-max-bytes", users: both, def: strconv.Itoa(natsbus.DefaultTaskMaxBytes),
			doc:   "bytes the JetStream log of task events may hold (4 GiB); past it the oldest events go; give every process the same",
			value: integer(&c.LogMaxBytes, 1<<20, 1<<50)},
		{env: "TETHER_CONNECT_TIMEOUT", flag: "connect-timeout", users: both, def: dur(natsbus.DefaultMaxElapsed),
			doc:   "how long Postgres and NATS are retried at start before the process exits non-zero",
			value: duration(&c.ConnectTimeout)},
		{env: "TETHER_MIGRATE", flag: "migrate", users: both, def: "true",
			doc:   "apply the pending migrations at start (under an advisory lock, several processes at once are safe); `false`: apply none and refuse to start on a schema that is behind, for deployments that run `gateway migrate` first ([docs/deploy.md](docs/deploy.md#migrations))",
			value: boolean(&c.Migrate)},
		{env: "TETHER_MIGRATE_TIMEOUT", flag: "migrate-timeout", users: both, def: dur(postgres.DefaultMigrateTimeout),
			doc:   "how long the migration step may take, after connecting, the wait for another process's migration included; a migration it cuts off is rolled back and the process exits non-zero",
			value: duration(&c.MigrateTimeout)},
		{env: "TETHER_STATEMENT_TIMEOUT", flag: "statement-timeout", users: both, def: dur(postgres.DefaultStatementTimeout),
			doc:   "Postgres `statement_timeout` of every session: a statement that runs longer is ended and its request answers `unavailable` (a `statement_timeout` in `DATABASE_URL` wins; migrations have none)",
			value: duration(&c.StatementTimeout)},
		{env: "TETHER_LOCK_TIMEOUT", flag: "lock-timeout", users: both, def: dur(postgres.DefaultLockTimeout),
			doc:   "Postgres `lock_timeout` of every session: a request that waits longer for a row or table another transaction holds answers `unavailable` (a `lock_timeout` in `DATABASE_URL` wins; migrations have none)",
			value: duration(&c.LockTimeout)},
		{env: "TETHER_REQUEST_TIMEOUT", flag: "request-timeout", users: Gateway, def: dur(gateway.DefaultRequestTimeout),
			doc:   "deadline of one request's work: the HTTP JSON endpoints, WebSocket `history` and `conversations`; past it `unavailable` (503)",
			value: duration(&c.RequestTimeout)},
		{env: "TETHER_CLAIM_TIMEOUT", flag: "claim-timeout", users: Runner, def: dur(runner.DefaultClaimTimeout),
			doc:   "deadline of a runner's claim of a dispatched task; past it the dispatch comes back for another try",
			value: duration(&c.ClaimTimeout)},
		{env: "TETHER_PACK_DELTAS", flag: "pack-deltas", users: Runner, def: "true",
			doc:   "pack consecutive deltas that come faster than a few milliseconds apart into one log message (a fast answer costs NATS a message per pack, not per token; a slow one still sends each delta at once); `false`: one message per event, while gateways or runners older than packs still read the log ([docs/deploy.md](docs/deploy.md#upgrading-to-packed-deltas))",
			value: boolean(&c.PackDeltas)},
		{env: "TETHER_MAINTENANCE_TIMEOUT", flag: "maintenance-timeout", users: both, def: dur(maintenance.DefaultStepTimeout),
			doc:   "deadline of each step of a maintenance round (expire, hand over, purge, sweep, dispatch again); past it the step is logged and the next round tries again",
			value: duration(&c.MaintenanceTimeout)},
		{env: "TETHER_MAINTENANCE_INTERVAL", flag: "maintenance-interval", users: Runner, def: dur(maintenance.DefaultInterval),
			doc:   "how often the runner's maintenance loop runs (the gateway's runs every second)",
			value: duration(&c.MaintenanceInterval)},
		{env: "TETHER_LOG_LEVEL", flag: "log-level", users: both, def: "info",
			doc:   "`debug`, `info`, `warn`, `error`",
			value: level(&c.LogLevel)},
		{env: "TETHER_PPROF_ADDR", flag: "pprof-addr", users: both,
			defDoc: "unset: off",
			doc:    "serves Go's profiler (`/debug/pprof/`) on this address, e.g. `127.0.0.1:6060`, and the runner's `/metrics`; keep it private",
			value:  str(&c.PprofAddr)},
	}
}
