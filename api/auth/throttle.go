package auth

import (
	"container/list"
	"crypto/sha256"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ThrottleConfig says how many wrong credentials the Throttle lets through.
// Each account name and each client address has a token bucket: Failures
// wrong credentials at once, then one more every Window/Failures; a Window
// without failures fills it again.
type ThrottleConfig struct {
	// AccountFailures is the allowance of one account name.
	AccountFailures int
	// AddrFailures is the allowance of one client address (see AddrKey).
	AddrFailures int
	// Window is the time in which a spent allowance comes back in full.
	Window time.Duration
	// MaxEntries bounds how many account names, and separately how many
	// addresses, are remembered; when full, the one that failed least
	// recently is forgotten.
	MaxEntries int
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client (see ClientAddr).
	TrustedProxies []netip.Prefix
	// Log, when set, receives a warning each time an account or an address
	// spends its allowance.
	Log *slog.Logger
}

// DefaultThrottle is the throttle of a hub whose configuration says nothing:
// 10 wrong passwords per account and 100 per address in 15 minutes (then
// one every 90 and 9 seconds), remembering up to 50,000 of each.
func DefaultThrottle() ThrottleConfig {
	return ThrottleConfig{AccountFailures: 10, AddrFailures: 100, Window: 15 * time.Minute, MaxEntries: 50_000}
}

// Throttle slows down guessing of passwords and tokens: a credential check
// is refused, before anything is checked, while the account it names or the
// client address it comes from has spent its allowance of failures (see
// ThrottleConfig). Successful checks cost nothing, so clients that know
// their credentials are never blocked by other accounts' failures from other
// addresses. Its memory is bounded by MaxEntries whatever names clients send.
type Throttle struct {
	cfg ThrottleConfig
	now func() time.Time

	mu       sync.Mutex
	accounts *buckets // keyed by the SHA-256 of the name, so keys stay small
	addrs    *buckets // keyed by AddrKey
}

// NewThrottle returns a Throttle with the given settings, which must be
// positive.
func NewThrottle(cfg ThrottleConfig) *Throttle {
	return &Throttle{cfg: cfg, now: time.Now,
		accounts: newBuckets(cfg.AccountFailures, cfg.Window, cfg.MaxEntries),
		addrs:    newBuckets(cfg.AddrFailures, cfg.Window, cfg.MaxEntries)}
}

// Allow starts a credential check for account ("" when the credential
// names none, as a refresh token does) sent by r's client.
//
// While the account or the address has no failure left, it returns how
// long to wait before trying again, in whole seconds (at least one, as
// Retry-After needs), and a nil done. Otherwise it returns done, which the
// caller must call once with whether the credentials were wrong. Until
// then the attempt holds one failure of the allowance, so many attempts
// sent at once cannot get past it. A nil Throttle allows everything.
func (t *Throttle) Allow(r *http.Request, account string) (done func(failed bool), wait time.Duration) {
	if t == nil {
		return func(bool) {}, 0
	}
	addr := AddrKey(ClientAddr(r, t.cfg.TrustedProxies))
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	held := []*bucket{t.addrs.get(addr.String())}
	if account != "" {
		sum := sha256.Sum256([]byte(account))
		held = append(held, t.accounts.get(string(sum[:])))
	}
	for _, b := range held {
		wait = max(wait, b.wait(now))
	}
	if wait > 0 {
		for _, b := range held {
			b.forgetIfIdle(now)
		}
		return nil, time.Duration(math.Ceil(wait.Seconds())) * time.Second
	}
	for _, b := range held {
		b.pending++
	}
	var once sync.Once
	return func(failed bool) { once.Do(func() { t.done(held, failed, account, addr) }) }, 0
}

func (t *Throttle) done(held []*bucket, failed bool, account string, addr netip.Prefix) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range held {
		b.pending--
		if failed {
			b.set.touch(b)
			if b.lim.AllowN(now, 1) && b.lim.TokensAt(now) < 1 && t.cfg.Log != nil {
				t.warn(b, account, addr) // this failure spent the allowance
			}
		}
		b.forgetIfIdle(now)
	}
}

func (t *Throttle) warn(b *bucket, account string, addr netip.Prefix) {
	if b.set == t.accounts {
		if len(account) > 64 {
			account = account[:64] + "…"
		}
		t.cfg.Log.Warn("too many failed credential checks: account throttled", "account", account, "client", addr.String())
		return
	}
	t.cfg.Log.Warn("too many failed credential checks: client address throttled", "client", addr.String())
}

// buckets is a bounded set of token buckets, one per key, that forgets the
// least recently failed key first when full.
type buckets struct {
	limit rate.Limit
	burst int
	max   int
	lru   list.List // of *bucket, most recently failed first
	byKey map[string]*bucket
}

type bucket struct {
	set     *buckets
	key     string
	elem    *list.Element
	lim     *rate.Limiter
	pending int // attempts let through and not done yet
}

func newBuckets(failures int, window time.Duration, maxEntries int) *buckets {
	return &buckets{limit: rate.Every(window / time.Duration(failures)), burst: failures,
		max: maxEntries, byKey: map[string]*bucket{}}
}

// get returns key's bucket, a full new one when key is not remembered.
func (s *buckets) get(key string) *bucket {
	if b, ok := s.byKey[key]; ok {
		return b
	}
	if len(s.byKey) >= s.max {
		s.remove(s.lru.Back().Value.(*bucket))
	}
	b := &bucket{set: s, key: key, lim: rate.NewLimiter(s.limit, s.burst)}
	b.elem = s.lru.PushFront(b)
	s.byKey[key] = b
	return b
}

func (s *buckets) touch(b *bucket) {
	if s.byKey[b.key] == b {
		s.lru.MoveToFront(b.elem)
	}
}

func (s *buckets) remove(b *bucket) {
	if s.byKey[b.key] == b {
		delete(s.byKey, b.key)
		s.lru.Remove(b.elem)
	}
}

// wait is how long until one more attempt fits beside those in progress.
func (b *bucket) wait(now time.Time) time.Duration {
	missing := float64(b.pending) + 1 - b.lim.TokensAt(now)
	if missing <= 0 {
		return 0
	}
	return time.Duration(missing / float64(b.set.limit) * float64(time.Second))
}

// forgetIfIdle drops a bucket that is full and unused: it knows nothing a
// new one would not, so only keys with recent failures take memory.
func (b *bucket) forgetIfIdle(now time.Time) {
	if b.pending == 0 && b.lim.TokensAt(now) >= float64(b.set.burst) {
		b.set.remove(b)
	}
}
