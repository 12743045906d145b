package main

import (
	"context"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	caserver "github.com/straitmesh/strait/internal/ca/server"
	"github.com/straitmesh/strait/internal/proxypush"
)

// xdsIdentity authenticates an xDS stream as istiod does on its TLS port
// (15012): by the bearer token the agent sends with it (its service
// account token, caclient.TokenCredentials), checked by the CA's
// authenticators (authn: the TokenReview, straitd's own tokens). A stream
// over plaintext (15010), or without a token, has no identity; a token
// that does not check is an error (the stream still runs, without an
// identity). The identity lets the registry serve a gateway its Secrets
// when its connection's source address is not its pod's
// (registry/kube secretauthz.go).
func xdsIdentity(authn func() []caserver.Authenticator) func(context.Context) (*proxypush.Identity, error) {
	return func(ctx context.Context) (*proxypush.Identity, error) {
		p, ok := peer.FromContext(ctx)
		if !ok {
			return nil, nil
		}
		if _, isTLS := p.AuthInfo.(credentials.TLSInfo); !isTLS {
			return nil, nil // a token over plaintext proves nothing
		}
		md, _ := metadata.FromIncomingContext(ctx)
		tokens := md.Get("authorization")
		a := authn()
		if len(tokens) == 0 || len(a) == 0 {
			return nil, nil
		}
		caller, err := caserver.AuthenticateBearer(ctx, a, tokens)
		if err != nil {
			return nil, err
		}
		return &proxypush.Identity{Namespace: caller.Namespace, ServiceAccount: caller.ServiceAccount}, nil
	}
}
