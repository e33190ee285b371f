/**
 * Admission in front of a saturated model: {@link io.kvrouter.admission.FairQueue}, priority bands
 * with a starvation bound, and weighted fair shares among tenants on what each request really costs
 * the engine (uncached prefill plus expected decode tokens). No dependencies; the gateway decides
 * when a model is saturated and holds the queue's lock.
 */
@NullMarked
package io.kvrouter.admission;

import org.jspecify.annotations.NullMarked;
