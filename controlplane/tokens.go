package controlplane

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/controlplane/api"
)

// KindTenantKeys holds a tenant's Felix signing keys, private keys
// included, so that every control plane on one store mints with the same
// keys. It is deliberately not in Kinds: ParseStoreKey does not know it, so
// the etcd store's List, Snapshot and Changes skip its keys like any
// foreign key, and the server drops it from the memory store's feed
// (publicChanges). Only Get by its exact Ref reads it, and no API route
// names it.
const KindTenantKeys Kind = "tenant_key"

func tenantKeysRef(tenant string) Ref { return Ref{Kind: KindTenantKeys, Path: tenant} }

// TokensConfig configures the control plane's token service.
type TokensConfig struct {
	// Minter configures the Felix tokens minted (issuer, audience, TTL).
	Minter auth.MinterConfig
	// Fetcher fetches the IdPs' key sets; nil makes one with defaults.
	Fetcher *auth.Fetcher
}

// Tokens is the control plane's token service: the token exchange, the
// tenants' Felix keys, and (as an auth.KeySource) the keys the
// FelixTokenAuthorizer verifies with.
//
// The store is the truth: before using a tenant's keys or IdP
// configuration, Tokens reads the stored item and reinstalls it in the
// Minter or IdPVerifier when its revision changed. A rotation or tenant
// change made by another control plane on the same etcd is therefore seen
// on the next request, at the cost of one store Get per use.
type Tokens struct {
	store     Store
	minter    *auth.Minter
	minterCfg auth.MinterConfig // Rotate's scratch Minter: same TTL, skew, clock
	idp       *auth.IdPVerifier

	mu struct {
		sync.Mutex
		keyRev map[string]int64 // tenant -> revision of the installed keys
		idpRev map[string]int64 // tenant -> revision of the installed tenant
	}
}

// NewTokens returns a token service over store.
func NewTokens(store Store, cfg TokensConfig) (*Tokens, error) {
	m, err := auth.NewMinter(cfg.Minter)
	if err != nil {
		return nil, err
	}
	if cfg.Fetcher == nil {
		if cfg.Fetcher, err = auth.NewFetcher(auth.FetcherConfig{}); err != nil {
			return nil, err
		}
	}
	v, err := auth.NewIdPVerifier(auth.IdPConfig{Fetcher: cfg.Fetcher})
	if err != nil {
		return nil, err
	}
	t := &Tokens{store: store, minter: m, minterCfg: cfg.Minter, idp: v}
	t.mu.keyRev = map[string]int64{}
	t.mu.idpRev = map[string]int64{}
	return t, nil
}

// syncKeys installs tenant's stored keys, creating them if the tenant
// exists without keys (its creation was interrupted, or it predates them).
func (t *Tokens) syncKeys(ctx context.Context, tenant string) error {
	it, err := t.store.Get(ctx, tenantKeysRef(tenant))
	if errors.Is(err, ErrNotFound) {
		return t.createKeys(ctx, tenant)
	}
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.installLocked(tenant, it)
}

func (t *Tokens) installLocked(tenant string, it Item) error {
	if t.mu.keyRev[tenant] == it.Revision {
		return nil
	}
	var ks auth.KeySet
	if err := json.Unmarshal(it.Value, &ks); err != nil {
		return fmt.Errorf("controlplane: stored keys of tenant %q: %w", tenant, err)
	}
	if err := t.minter.SetKeys(tenant, ks); err != nil {
		return err
	}
	t.mu.keyRev[tenant] = it.Revision
	return nil
}

// createKeys stores a key set for a tenant that has none and installs it.
// If this control plane still holds a set for the tenant (another control
// plane is between the delete and the create of a rotation), that set is
// stored again rather than a fresh one, so that no key a live token was
// signed with is lost; the rotation then reports a conflict. If another
// control plane stored a set first, that one wins and is installed.
func (t *Tokens) createKeys(ctx context.Context, tenant string) error {
	ten, err := t.store.Get(ctx, Ref{Kind: KindTenant, Path: tenant})
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	ks, err := t.minter.Keys(tenant)
	// Keys stored before this tenant was created belong to an earlier
	// tenant of the same name: never reuse them.
	if err != nil || t.mu.keyRev[tenant] < ten.Revision {
		if ks, err = freshKeys(tenant); err != nil {
			return err
		}
	}
	return t.storeLocked(ctx, tenant, ks)
}

// freshKeys draws a first key set (through a scratch Minter, which owns
// key generation).
func freshKeys(tenant string) (auth.KeySet, error) {
	m, err := auth.NewMinter(auth.MinterConfig{})
	if err != nil {
		return auth.KeySet{}, err
	}
	if err := m.AddTenant(tenant); err != nil {
		return auth.KeySet{}, err
	}
	return m.Keys(tenant)
}

// storeLocked writes ks as tenant's keys and installs them; on a lost race
// it installs the winner's.
func (t *Tokens) storeLocked(ctx context.Context, tenant string, ks auth.KeySet) error {
	raw, err := json.Marshal(ks)
	if err != nil {
		return err
	}
	rev, err := t.store.Create(ctx, tenantKeysRef(tenant), raw)
	if errors.Is(err, ErrExists) {
		it, gerr := t.store.Get(ctx, tenantKeysRef(tenant))
		if gerr != nil {
			return gerr
		}
		return t.installLocked(tenant, it)
	}
	if err != nil {
		return err
	}
	if err := t.minter.SetKeys(tenant, ks); err != nil {
		return err
	}
	t.mu.keyRev[tenant] = rev
	return nil
}

// Rotate gives tenant a new current key; the old one stays in the JWKS
// until the tokens it signed have expired. The new set is computed on a
// scratch Minter and installed only once stored, so nothing is signed with
// a key the store lacks. The store has no update, so the stored set is
// replaced by a delete and a create; a control plane that reads in between
// stores back the set it holds (createKeys), and the rotation then fails
// with a conflict instead of losing a key.
func (t *Tokens) Rotate(ctx context.Context, tenant string) (string, error) {
	if err := t.syncKeys(ctx, tenant); err != nil {
		return "", err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	next, kid, err := t.rotatedLocked(tenant)
	if err != nil {
		return "", err
	}
	if _, err := t.store.Delete(ctx, tenantKeysRef(tenant)); err != nil && !errors.Is(err, ErrNotFound) {
		return "", err
	}
	if err := t.storeLocked(ctx, tenant, next); err != nil {
		return "", err
	}
	if cur, _ := t.minter.Keys(tenant); cur.Current.ID != kid {
		return "", apiErr(ErrExists, "tenant %q keys changed concurrently (another control plane); retry the rotation", tenant)
	}
	return kid, nil
}

// rotatedLocked returns tenant's key set after a rotation, without
// installing it.
func (t *Tokens) rotatedLocked(tenant string) (auth.KeySet, string, error) {
	ks, err := t.minter.Keys(tenant)
	if err != nil {
		return auth.KeySet{}, "", err
	}
	scratch, err := auth.NewMinter(t.minterCfg)
	if err != nil {
		return auth.KeySet{}, "", err
	}
	if err := scratch.SetKeys(tenant, ks); err != nil {
		return auth.KeySet{}, "", err
	}
	kid, err := scratch.Rotate(tenant)
	if err != nil {
		return auth.KeySet{}, "", err
	}
	next, err := scratch.Keys(tenant)
	return next, kid, err
}

// forget drops a deleted tenant's keys from the store and the Minter.
func (t *Tokens) forget(ctx context.Context, tenant string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.minter.RemoveTenant(tenant)
	t.idp.RemoveTenant(tenant)
	delete(t.mu.keyRev, tenant)
	delete(t.mu.idpRev, tenant)
	if _, err := t.store.Delete(ctx, tenantKeysRef(tenant)); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

// resetKeys replaces tenant's keys with a fresh set (a new tenant).
func (t *Tokens) resetKeys(ctx context.Context, tenant string) error {
	if err := t.forget(ctx, tenant); err != nil {
		return err
	}
	return t.createKeys(ctx, tenant)
}

// JWKS returns tenant's public keys, current first.
func (t *Tokens) JWKS(ctx context.Context, tenant string) ([]byte, error) {
	if err := t.syncKeys(ctx, tenant); err != nil {
		return nil, err
	}
	return t.minter.JWKS(tenant)
}

// PublicKey implements auth.KeySource for the FelixTokenAuthorizer.
func (t *Tokens) PublicKey(ctx context.Context, tenant, kid string) (ed25519.PublicKey, error) {
	if err := t.syncKeys(ctx, tenant); err != nil {
		if errors.Is(err, ErrNotFound) {
			// Not ErrTenant, which means a token of another tenant (403):
			// a token of a deleted tenant names a key that is gone (401).
			return nil, fmt.Errorf("%w: tenant %q does not exist", auth.ErrUnknownKey, tenant)
		}
		return nil, fmt.Errorf("%w: tenant %q keys: %v", auth.ErrJWKSUnavailable, tenant, err)
	}
	return t.minter.PublicKey(ctx, tenant, kid)
}

// syncIdP installs tenant's stored IdP configuration in the verifier.
func (t *Tokens) syncIdP(ctx context.Context, tenant string) error {
	it, err := t.store.Get(ctx, Ref{Kind: KindTenant, Path: tenant})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			t.idp.RemoveTenant(tenant)
		}
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.idpRev[tenant] == it.Revision {
		return nil
	}
	var ten api.Tenant
	if err := json.Unmarshal(it.Value, &ten); err != nil {
		return fmt.Errorf("controlplane: stored tenant %q: %w", tenant, err)
	}
	if ten.IdP == nil {
		t.idp.RemoveTenant(tenant)
	} else if err := t.idp.SetTenant(idpAuthConfig(ten.IdP, tenant)); err != nil {
		return err
	}
	t.mu.idpRev[tenant] = it.Revision
	return nil
}

// Exchange verifies an IdP token for tenant and mints a Felix token.
func (t *Tokens) Exchange(ctx context.Context, tenant, idpToken string, actions []auth.Action) (string, *auth.Claims, error) {
	if err := t.syncIdP(ctx, tenant); err != nil {
		return "", nil, err
	}
	if err := t.syncKeys(ctx, tenant); err != nil {
		return "", nil, err
	}
	return auth.Exchange(ctx, t.idp, t.minter, tenant, idpToken, actions)
}

// Mint signs a Felix token for subject on tenant with perms, with the
// tenant's current stored key, as the exchange does after verifying an IdP
// token. It is for a process that holds the control plane in-process and
// is itself the identity: `make run`'s embedded control plane mints its
// dev token with it, and the development issuer (POST /v1/token/mint) its
// tokens.
func (t *Tokens) Mint(ctx context.Context, tenant, subject string, perms []auth.Permission) (string, *auth.Claims, error) {
	if err := t.syncKeys(ctx, tenant); err != nil {
		return "", nil, err
	}
	return t.minter.Mint(tenant, subject, perms)
}
