package turnc

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/pion/stun/v4"
)

// runMaintenance keeps the allocation until Close: it sleeps until the next
// refresh or renewal is due, or until Send asks for a channel.
func (c *Client) runMaintenance() {
	defer c.wg.Done()
	timer := time.NewTimer(time.Until(c.refreshAt))
	defer timer.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.wake:
		case <-timer.C:
		}
		timer.Reset(time.Until(c.maintain(c.ctx)))
	}
}

// maintain does what is due and returns when to come back.
func (c *Client) maintain(ctx context.Context) time.Time {
	if c.lost && !c.reallocate(ctx) {
		return c.reallocAt
	}
	if !time.Now().Before(c.refreshAt) {
		c.refreshAllocation(ctx)
	}
	next := c.refreshAt
	for _, ch := range c.table.Load().byNumber {
		if c.lost || ctx.Err() != nil {
			return time.Now()
		}
		if renewAt, bound := c.maintainChannel(ctx, ch); bound && renewAt.Before(next) {
			next = renewAt
		}
	}
	return next
}

// allocate requests a new allocation and adopts it.
func (c *Client) allocate(ctx context.Context) (netip.AddrPort, error) {
	res, err := c.request(ctx, stun.MethodAllocate, requestedTransportUDP, lifetimeAttr(requestedLifetime))
	if hasCode(err, stun.CodeAllocMismatch) {
		// This 5-tuple still holds the allocation of an earlier run on the
		// same port: release it and allocate anew once the server let it go
		// (coturn takes a moment).
		if _, err := c.request(ctx, stun.MethodRefresh, lifetimeAttr(0)); err != nil {
			return netip.AddrPort{}, fmt.Errorf("turnc: releasing an earlier allocation: %w", err)
		}
		for wait := releaseWait; hasCode(err, stun.CodeAllocMismatch) && wait <= maxReleaseWait; wait *= 2 {
			select {
			case <-ctx.Done():
				return netip.AddrPort{}, ctx.Err()
			case <-time.After(wait):
			}
			res, err = c.request(ctx, stun.MethodAllocate, requestedTransportUDP, lifetimeAttr(requestedLifetime))
		}
	}
	if err != nil {
		return netip.AddrPort{}, err
	}
	relayed, err := getXORAddress(res, stun.AttrXORRelayedAddress)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("turnc: allocation without a relayed address: %w", err)
	}
	lifetime, err := getLifetime(res)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("turnc: allocation without a lifetime: %w", err)
	}
	mapped, _ := getXORAddress(res, stun.AttrXORMappedAddress) // optional
	c.setLifetime(lifetime)
	c.mu.Lock()
	c.relayed, c.mapped = relayed, mapped
	c.mu.Unlock()
	c.log.Info("TURN allocation", "relayed", relayed, "mapped", mapped, "lifetime", lifetime)
	return relayed, nil
}

func (c *Client) setLifetime(lifetime time.Duration) {
	now := time.Now()
	c.expiresAt = now.Add(lifetime)
	c.refreshAt = now.Add(min(c.cfg.KeepAlive, lifetime/2))
}

// refreshAllocation refreshes the allocation, and declares it lost when the
// server no longer knows it or it expired while refreshes failed.
func (c *Client) refreshAllocation(ctx context.Context) {
	res, err := c.request(ctx, stun.MethodRefresh, lifetimeAttr(requestedLifetime))
	var lifetime time.Duration
	if err == nil {
		if lifetime, err = getLifetime(res); err != nil {
			err = fmt.Errorf("turnc: refresh answer without a lifetime: %w", err)
		}
	}
	switch {
	case err == nil:
		c.setLifetime(lifetime)
		c.stats.refreshes.Add(1)
	case ctx.Err() != nil:
	case hasCode(err, stun.CodeAllocMismatch) || !time.Now().Before(c.expiresAt):
		c.loseAllocation(err)
	default:
		c.log.Warn("refreshing the TURN allocation failed, retrying", "err", err)
		c.refreshAt = time.Now().Add(refreshRetryAfter)
		if c.refreshAt.After(c.expiresAt) {
			c.refreshAt = c.expiresAt
		}
	}
}

// loseAllocation forgets the allocation; the channels in use are bound
// again once a new one is granted.
func (c *Client) loseAllocation(cause error) {
	c.log.Warn("TURN allocation lost, allocating again", "err", cause)
	c.lost = true
	c.reallocAt = time.Now()
	c.reallocDelay = firstReallocDelay
	c.mu.Lock()
	c.relayed = netip.AddrPort{}
	for _, ch := range c.table.Load().byNumber {
		if ch.state.Load() == chanBound && ch.used.Load() || len(ch.queued) > 0 {
			ch.state.Store(chanBinding)
		} else {
			ch.state.Store(chanIdle)
		}
	}
	c.mu.Unlock()
	if c.cfg.OnRelayedAddr != nil {
		c.cfg.OnRelayedAddr(netip.AddrPort{})
	}
}

// reallocate tries to allocate again once its backoff allows, and reports
// whether there is an allocation now.
func (c *Client) reallocate(ctx context.Context) bool {
	if time.Now().Before(c.reallocAt) {
		return false
	}
	relayed, err := c.allocate(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("TURN allocation failed", "err", err, "retry_in", c.reallocDelay)
		}
		c.reallocAt = time.Now().Add(c.reallocDelay)
		c.reallocDelay = min(2*c.reallocDelay, lastReallocDelay)
		return false
	}
	c.lost = false
	c.stats.reallocations.Add(1)
	if c.cfg.OnRelayedAddr != nil {
		c.cfg.OnRelayedAddr(relayed)
	}
	return true
}

// maintainChannel binds a channel Send asked for, renews a bound one that
// is due and was used since its last renewal, and lets an unused one
// expire. It returns when a bound channel is due next.
func (c *Client) maintainChannel(ctx context.Context, ch *channel) (renewAt time.Time, bound bool) {
	switch ch.state.Load() {
	case chanBinding:
		c.bind(ctx, ch)
	case chanBound:
		if time.Now().Before(ch.renewAt) {
			return ch.renewAt, true
		}
		if ch.used.Swap(false) {
			c.bind(ctx, ch)
		} else {
			// The server lets it expire; the number stays the peer's.
			c.mu.Lock()
			ch.state.Store(chanIdle)
			c.mu.Unlock()
		}
	}
	return ch.renewAt, ch.state.Load() == chanBound
}

// bind binds or renews a channel (which also installs or refreshes the
// permission for the peer's address) and sends the datagrams waiting for
// it, in order, before Send may go straight to ChannelData.
func (c *Client) bind(ctx context.Context, ch *channel) {
	_, err := c.request(ctx, stun.MethodChannelBind,
		xorAddressAttr{typ: stun.AttrXORPeerAddress, addr: ch.peer}, channelNumberAttr(ch.number))
	if ctx.Err() != nil {
		return
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.log.Debug("binding a TURN channel failed", "peer", ch.peer, "channel", ch.number, "err", err)
		var refused *ServerError
		if ch.state.Load() == chanBound && !errors.As(err, &refused) {
			// A renewal lost in transit: the binding holds until it expires.
			ch.used.Store(true)
			ch.renewAt = now.Add(refreshRetryAfter)
			return
		}
		ch.state.Store(chanIdle)
		ch.retryAfter = now.Add(bindRetryAfter)
		c.stats.dropped.Add(uint64(len(ch.queued)))
		ch.queued = nil
		return
	}
	for _, b := range ch.queued {
		if err := c.sendChannelData(ch, b); err != nil {
			c.stats.dropped.Add(1)
		}
	}
	ch.queued = nil
	ch.state.Store(chanBound)
	ch.renewAt = now.Add(c.cfg.BindingRefresh)
	c.stats.bindings.Add(1)
}

// buildRequest builds a request, authenticated once the realm and nonce
// are known.
func (c *Client) buildRequest(method stun.Method, attrs ...stun.Setter) (*stun.Message, error) {
	setters := make([]stun.Setter, 0, len(attrs)+7)
	setters = append(setters, stun.TransactionID, stun.NewType(method, stun.ClassRequest))
	setters = append(setters, attrs...)
	if c.nonce != nil {
		setters = append(setters, c.username, c.realm, c.nonce, c.integrity)
	}
	setters = append(setters, stun.Fingerprint)
	return stun.Build(setters...)
}

// request performs one request. An answer 401 to a request not yet
// authenticated, or 438 (stale nonce) to any, brings the realm and a fresh
// nonce, and the request goes again with them: coturn expires nonces, and
// a client that gives up there loses its allocation.
func (c *Client) request(ctx context.Context, method stun.Method, attrs ...stun.Setter) (*stun.Message, error) {
	for attempt := 1; ; attempt++ {
		authenticated := c.nonce != nil
		req, err := c.buildRequest(method, attrs...)
		if err != nil {
			return nil, fmt.Errorf("turnc: building %v: %w", method, err)
		}
		result, err := c.turn.PerformTransactionWithContext(req, c.serverAddr, false, ctx)
		if err != nil {
			return nil, fmt.Errorf("turnc: %v to %v: %w", method, c.cfg.Server, err)
		}
		res := result.Msg
		if res.Type.Class == stun.ClassSuccessResponse {
			if authenticated {
				if err := c.integrity.Check(res); err != nil {
					return nil, fmt.Errorf("turnc: %v answer from %v failed its integrity check: %w", method, c.cfg.Server, err)
				}
			}
			return res, nil
		}
		var code stun.ErrorCodeAttribute
		if err := code.GetFrom(res); err != nil {
			return nil, fmt.Errorf("turnc: %v: error answer without an error code: %w", method, err)
		}
		refused := &ServerError{Method: method, Code: code.Code, Reason: string(code.Reason)}
		retry := code.Code == stun.CodeStaleNonce || code.Code == stun.CodeUnauthorized && !authenticated
		if !retry || attempt == maxAuthAttempts {
			return nil, refused
		}
		if code.Code == stun.CodeStaleNonce {
			c.stats.stale.Add(1)
		}
		if err := c.learnAuth(res); err != nil {
			return nil, err
		}
	}
}

// learnAuth takes the nonce, and the realm when present, from a 401 or 438
// answer.
func (c *Client) learnAuth(res *stun.Message) error {
	var nonce stun.Nonce
	if err := nonce.GetFrom(res); err != nil {
		return fmt.Errorf("turnc: %v answered without a nonce: %w", c.cfg.Server, err)
	}
	var realm stun.Realm
	if err := realm.GetFrom(res); err == nil && string(realm) != string(c.realm) {
		if c.cfg.Realm != "" && string(realm) != c.cfg.Realm {
			return fmt.Errorf("turnc: %v announces realm %q, configured is %q", c.cfg.Server, realm, c.cfg.Realm)
		}
		c.realm = append(stun.Realm(nil), realm...)
		c.integrity = stun.NewLongTermIntegrity(c.cfg.Username, string(realm), c.cfg.Password)
	}
	if c.realm == nil {
		return fmt.Errorf("turnc: %v answered without a realm", c.cfg.Server)
	}
	c.nonce = append(stun.Nonce(nil), nonce...)
	return nil
}

func hasCode(err error, code stun.ErrorCode) bool {
	var refused *ServerError
	return errors.As(err, &refused) && refused.Code == code
}
