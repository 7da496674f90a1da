// Package handeling owns what the service's parts agree on about an administratieve
// handeling (docs/contract.md): its delivery status (Status) and the rules on it that more than
// one part writes in SQL (which handelingen are still to be delivered, which hold their
// persons back), the publication message that travels from publicatie to levering and its
// header, the cluster lease as publicatie writes it and operate reads it, and the contract's
// defaults (queues, the excluded soort, the fout policy, the notify channel, the metrics
// namespace).
//
// publicatie, levering and operate orchestrate; SQL that only one of them runs stays there,
// written with this package's status literals. It imports nothing of the service, so every
// part can use it.
package handeling
