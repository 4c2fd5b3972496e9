/*
 * headroom DPDK shim: real (linkable) functions for what DPDK 22.11 only
 * offers as static inline functions, macros or thread-local variables, so
 * that Rust can call them through bindgen-generated declarations.
 *
 * Every function here is a thin wrapper with the same contract as the DPDK
 * function it names; see the DPDK API docs for rte_<name without prefix>.
 * Compiled with the flags of `pkg-config --cflags libdpdk`.
 */
#ifndef HEADROOM_DPDK_SHIM_H
#define HEADROOM_DPDK_SHIM_H

#include <stdint.h>

struct rte_mbuf;
struct rte_mempool;

/* ethdev fast path (rte_ethdev.h, static inline) */
uint16_t headroom_shim_eth_rx_burst(uint16_t port_id, uint16_t queue_id,
				    struct rte_mbuf **rx_pkts, uint16_t nb_pkts);
uint16_t headroom_shim_eth_tx_burst(uint16_t port_id, uint16_t queue_id,
				    struct rte_mbuf **tx_pkts, uint16_t nb_pkts);

/* mbuf allocation (rte_mbuf.h, static inline); rte_pktmbuf_free_bulk,
 * rte_pktmbuf_clone and rte_pktmbuf_copy are real functions and bound directly. */
struct rte_mbuf *headroom_shim_pktmbuf_alloc(struct rte_mempool *mp);
int headroom_shim_pktmbuf_alloc_bulk(struct rte_mempool *mp,
				     struct rte_mbuf **mbufs, unsigned int count);
void headroom_shim_pktmbuf_free(struct rte_mbuf *m);

/* mbuf data access (macros rte_pktmbuf_mtod, rte_pktmbuf_data_len,
 * rte_pktmbuf_pkt_len and static inline helpers). */
uint8_t *headroom_shim_pktmbuf_mtod(struct rte_mbuf *m);
uint16_t headroom_shim_pktmbuf_data_len(const struct rte_mbuf *m);
uint32_t headroom_shim_pktmbuf_pkt_len(const struct rte_mbuf *m);
void headroom_shim_pktmbuf_set_data_len(struct rte_mbuf *m, uint16_t len);
void headroom_shim_pktmbuf_set_pkt_len(struct rte_mbuf *m, uint32_t len);
uint16_t headroom_shim_pktmbuf_headroom(const struct rte_mbuf *m);
uint16_t headroom_shim_pktmbuf_tailroom(const struct rte_mbuf *m);
uint8_t *headroom_shim_pktmbuf_prepend(struct rte_mbuf *m, uint16_t len);
uint8_t *headroom_shim_pktmbuf_append(struct rte_mbuf *m, uint16_t len);
uint8_t *headroom_shim_pktmbuf_adj(struct rte_mbuf *m, uint16_t len);
int headroom_shim_pktmbuf_trim(struct rte_mbuf *m, uint16_t len);
int headroom_shim_pktmbuf_is_contiguous(const struct rte_mbuf *m);

/* Reference counts, for zero-copy flooding: add N-1 references, then hand
 * the same mbuf to N tx bursts (each transmit drops one reference). */
void headroom_shim_pktmbuf_refcnt_update(struct rte_mbuf *m, int16_t delta);
uint16_t headroom_shim_mbuf_refcnt_read(const struct rte_mbuf *m);

/* EAL: thread-local rte_errno (a macro over per_lcore__rte_errno), the
 * calling thread's lcore id (TLS) and the TSC read (static inline). */
int headroom_shim_errno(void);
unsigned int headroom_shim_lcore_id(void);
uint64_t headroom_shim_get_tsc_cycles(void);

#endif /* HEADROOM_DPDK_SHIM_H */
