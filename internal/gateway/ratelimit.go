package gateway

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiter is the per-user token bucket of TETHER_RATE: client messages and
// HTTP requests per second per user, with a burst of twice that, shared by
// all of a user's tabs on this gateway.
type limiter struct {
	rate rate.Limit
	now  func() time.Time

	mu        sync.Mutex
	users     map[string]*userBucket
	lastSweep time.Time
}

type userBucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// idleBucket is how long an unused bucket is kept; a full bucket is the same
// as a new one after 2 seconds, so forgetting it later changes nothing.
const idleBucket = time.Minute

func newLimiter(perSecond float64, now func() time.Time) *limiter {
	if perSecond <= 0 {
		return nil
	}
	return &limiter{rate: rate.Limit(perSecond), now: now, users: map[string]*userBucket{}}
}

// allow takes a token for user; a nil limiter allows everything.
func (l *limiter) allow(user string) bool {
	if l == nil {
		return true
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) > idleBucket {
		for u, b := range l.users {
			if now.Sub(b.seen) > idleBucket {
				delete(l.users, u)
			}
		}
		l.lastSweep = now
	}
	b, ok := l.users[user]
	if !ok {
		burst := int(2 * float64(l.rate))
		if burst < 1 {
			burst = 1
		}
		b = &userBucket{lim: rate.NewLimiter(l.rate, burst)}
		l.users[user] = b
	}
	b.seen = now
	return b.lim.AllowN(now, 1)
}
