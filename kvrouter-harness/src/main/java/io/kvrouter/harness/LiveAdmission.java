package io.kvrouter.harness;

import io.kvrouter.admission.TokenRateConfig;
import io.kvrouter.gateway.AdmissionConfig;

/**
 * One run of {@code bench fleet --admission} as FleetBench.runPolicy and FleetLoad need it: the
 * gateway's admission (null: fifo, today's gateway, no busy limit and no queue) with the router's
 * busy limits, and each request's tenant (sent in {@link #TENANT_HEADER}) and priority (the body's
 * vLLM {@code priority}), in trace order. Built by AdmissionFleetBench; read only.
 *
 * @param queue the gateway's admission settings, or null for fifo
 * @param busyRequests a rank with this many requests in flight is busy (with a queue)
 * @param busyPrefillTokens a rank with more prefill tokens than this in flight is busy; -1: never
 * @param holderWait whether a request may wait for the busy engine holding its prefix
 * @param tenants per request, its tenant's name
 * @param priorities per request, its priority (lower first; below 0 is the gateway's high band)
 * @param rates the gateway's per-tenant token-rate limits, in wall time (TokenRateConfig.OFF:
 *     none); they apply in fifo too
 */
record LiveAdmission(
    AdmissionConfig queue,
    int busyRequests,
    long busyPrefillTokens,
    boolean holderWait,
    String[] tenants,
    int[] priorities,
    TokenRateConfig rates) {

  /** The header the gateway reads a tenant from (AdmissionConfig.TenantSource.HEADER). */
  static final String TENANT_HEADER = "x-kvrouter-tenant";
}
