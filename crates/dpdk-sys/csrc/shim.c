/* See shim.h. Each wrapper forwards to the DPDK inline/macro it names. */
#include <rte_config.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "shim.h"

uint16_t headroom_shim_eth_rx_burst(uint16_t port_id, uint16_t queue_id,
				    struct rte_mbuf **rx_pkts, uint16_t nb_pkts)
{
	return rte_eth_rx_burst(port_id, queue_id, rx_pkts, nb_pkts);
}

uint16_t headroom_shim_eth_tx_burst(uint16_t port_id, uint16_t queue_id,
				    struct rte_mbuf **tx_pkts, uint16_t nb_pkts)
{
	return rte_eth_tx_burst(port_id, queue_id, tx_pkts, nb_pkts);
}

struct rte_mbuf *headroom_shim_pktmbuf_alloc(struct rte_mempool *mp)
{
	return rte_pktmbuf_alloc(mp);
}

int headroom_shim_pktmbuf_alloc_bulk(struct rte_mempool *mp,
				     struct rte_mbuf **mbufs, unsigned int count)
{
	return rte_pktmbuf_alloc_bulk(mp, mbufs, count);
}

void headroom_shim_pktmbuf_free(struct rte_mbuf *m)
{
	rte_pktmbuf_free(m);
}

uint8_t *headroom_shim_pktmbuf_mtod(struct rte_mbuf *m)
{
	return rte_pktmbuf_mtod(m, uint8_t *);
}

uint16_t headroom_shim_pktmbuf_data_len(const struct rte_mbuf *m)
{
	return rte_pktmbuf_data_len(m);
}

uint32_t headroom_shim_pktmbuf_pkt_len(const struct rte_mbuf *m)
{
	return rte_pktmbuf_pkt_len(m);
}

void headroom_shim_pktmbuf_set_data_len(struct rte_mbuf *m, uint16_t len)
{
	rte_pktmbuf_data_len(m) = len;
}

void headroom_shim_pktmbuf_set_pkt_len(struct rte_mbuf *m, uint32_t len)
{
	rte_pktmbuf_pkt_len(m) = len;
}

uint16_t headroom_shim_pktmbuf_headroom(const struct rte_mbuf *m)
{
	return rte_pktmbuf_headroom(m);
}

uint16_t headroom_shim_pktmbuf_tailroom(const struct rte_mbuf *m)
{
	return rte_pktmbuf_tailroom(m);
}

uint8_t *headroom_shim_pktmbuf_prepend(struct rte_mbuf *m, uint16_t len)
{
	return (uint8_t *)rte_pktmbuf_prepend(m, len);
}

uint8_t *headroom_shim_pktmbuf_append(struct rte_mbuf *m, uint16_t len)
{
	return (uint8_t *)rte_pktmbuf_append(m, len);
}

uint8_t *headroom_shim_pktmbuf_adj(struct rte_mbuf *m, uint16_t len)
{
	return (uint8_t *)rte_pktmbuf_adj(m, len);
}

int headroom_shim_pktmbuf_trim(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_trim(m, len);
}

int headroom_shim_pktmbuf_is_contiguous(const struct rte_mbuf *m)
{
	return rte_pktmbuf_is_contiguous(m);
}

void headroom_shim_pktmbuf_refcnt_update(struct rte_mbuf *m, int16_t delta)
{
	rte_pktmbuf_refcnt_update(m, delta);
}

uint16_t headroom_shim_mbuf_refcnt_read(const struct rte_mbuf *m)
{
	return rte_mbuf_refcnt_read(m);
}

int headroom_shim_errno(void)
{
	return rte_errno;
}

unsigned int headroom_shim_lcore_id(void)
{
	return rte_lcore_id();
}

uint64_t headroom_shim_get_tsc_cycles(void)
{
	return rte_get_tsc_cycles();
}
