/* templates/slot_reduce.h -- reductions by output slot (sf_slot_partial_*,
 * sf_slot_finish_*, sf_slot_runs_*) for f32, f64 (accumulating in double) and
 * i64: compiled once per type by sf_instantiate.h from sf_slot.c, which
 * defines check_slots and SF_RUN_COLS.
 *
 * A partial's row per slot is w accumulators and then the slot's stored row
 * count (in ACC: exact below 2^53 rows), side by side so that one element
 * touches one cache line. */

/* Sums the run of slot s that starts at k (values[k] already known in it),
   *e = k + 1 on entry; *e ends past the run or at end. Four registers, each
   block of four checked for the slot before it is added: one pass over slots
   and values, no add waits on the last. */
static inline ACC SF_FN(sum_run4)(const T *values, const int64_t *slot, int64_t s, int64_t k,
                                  int64_t *e_io, int64_t end) {
  int64_t e = *e_io;
  ACC a0 = (ACC)values[k], a1 = 0, a2 = 0, a3 = 0;
  for (; e + 4 <= end; e += 4) {
    if ((slot[e] != s) | (slot[e + 1] != s) | (slot[e + 2] != s) | (slot[e + 3] != s)) {
      break;
    }
    a0 += (ACC)values[e];
    a1 += (ACC)values[e + 1];
    a2 += (ACC)values[e + 2];
    a3 += (ACC)values[e + 3];
  }
  for (; e < end && slot[e] == s; ++e) a0 += (ACC)values[e];
  *e_io = e;
  return (a0 + a1) + (a2 + a3);
}

/* a (the stored rows' reduction) with u fills added, as every slot pass
 * adds them; with a = the identity, a slot with nothing stored */
static inline ACC SF_FN(slot_fills)(ACC a, ACC f, int64_t u, int op) {
  if (u > 0) {
    switch (op) {
      case SF_SLOT_SUM: a += (ACC)u * f; break;
      case SF_SLOT_PROD: a *= POW_ACC(f, u); break;
      default:
        if (!ISNAN(a) && (ISNAN(f) || (op == SF_SLOT_MAX ? f > a : f < a))) a = f;
    }
  }
  return a;
}

sf_status SF_FN(sf_slot_partial)(ACC *acc, const T *values, const int64_t *slot,
                                 int64_t k_begin, int64_t k_end, int64_t nslots, int64_t w,
                                 int op) {
  sf_status st = check_slots(k_begin, k_end, nslots, w, op, HAS_PROD);
  if (st != SF_OK) return st;
  if (acc == NULL || (k_end > k_begin && ((w > 0 && values == NULL) || slot == NULL))) {
    return SF_ERR_NULL_POINTER;
  }
  const ACC ident = op == SF_SLOT_SUM ? (ACC)0 : op == SF_SLOT_PROD ? (ACC)1
                    : op == SF_SLOT_MAX ? LOWEST : HIGHEST;
  const int64_t row = w + 1;
  for (int64_t s = 0; s < nslots; ++s) {
    for (int64_t c = 0; c < w; ++c) acc[s * row + c] = ident;
    acc[s * row + w] = 0;
  }
  /* Runs of equal slots (sorted slots) are folded in registers, so that no
   * step waits on a store; sums of one value per stored element in four
   * registers, each block of four checked for the slot before it is added.
   * A lone element (scattered slots) is added directly. */
  int64_t k = k_begin;
  while (k < k_end) {
    const int64_t s = slot[k];
    if ((uint64_t)s >= (uint64_t)nslots) return SF_ERR_INDEX_OUT_OF_RANGE;
    ACC *a = acc + s * row;
    int64_t e = k + 1;
    if (op == SF_SLOT_SUM && w == 1) {
      if (e == k_end || slot[e] != s) {
        a[0] += (ACC)values[k];
        a[1] += 1;
        k = e;
        continue;
      }
      a[0] += SF_FN(sum_run4)(values, slot, s, k, &e, k_end);
    } else if (w == 1 && op != SF_SLOT_PROD && (e == k_end || slot[e] != s)) {
      /* a lone element of max/min (scattered slots, softmax's maxima):
       * folded directly, a select rather than the run loop (NaN wins) */
      const ACC y = (ACC)values[k], x = a[0];
      a[0] = (ISNAN(y) || (op == SF_SLOT_MAX ? y > x : y < x)) ? y : x;
      a[1] += 1;
      k = e;
      continue;
    } else {
      while (e < k_end && slot[e] == s) ++e;
      for (int64_t c = 0; c < w; ++c) {
        ACC x = a[c]; /* column c of rows [k, e) folded by op (NaN wins max/min) */
        switch (op) {
          case SF_SLOT_SUM:
            for (int64_t j = k; j < e; ++j) x += (ACC)values[j * w + c];
            break;
          case SF_SLOT_PROD:
            for (int64_t j = k; j < e; ++j) x *= (ACC)values[j * w + c];
            break;
          case SF_SLOT_MAX:
            for (int64_t j = k; j < e; ++j) {
              const ACC y = (ACC)values[j * w + c];
              if (y > x || ISNAN(y)) x = y;
            }
            break;
          default:
            for (int64_t j = k; j < e; ++j) {
              const ACC y = (ACC)values[j * w + c];
              if (y < x || ISNAN(y)) x = y;
            }
        }
        a[c] = x;
      }
    }
    a[w] += (ACC)(e - k);
    k = e;
  }
  return SF_OK;
}

/* The elements slot `at` holds: its count column summed over the parts in
   part order; -1 when more than n positions (the indices repeat). */
static inline int64_t SF_FN(slot_count)(const ACC *acc, int64_t nparts,
                                        int64_t part, int64_t at, int64_t n) {
  int64_t t = 0;
  for (int64_t p = 0; p < nparts; ++p) t += (int64_t)acc[p * part + at];
  return t > n ? -1 : t;
}

sf_status SF_FN(sf_slot_finish)(T *out, int64_t *total, const ACC *acc, int64_t nparts,
                                const T *fill, int64_t s_begin, int64_t s_end,
                                int64_t nslots, int64_t w, int64_t n, int op) {
  sf_status st = check_slots(s_begin, s_end, nslots, w, op, HAS_PROD);
  if (st != SF_OK) return st;
  if (nparts < 0 || n < 0) return SF_ERR_NEGATIVE_SIZE;
  if (s_end > nslots) return SF_ERR_INVALID_ARGUMENT;
  if (s_end > s_begin &&
      ((w > 0 && (out == NULL || fill == NULL)) || total == NULL ||
       (nparts > 0 && acc == NULL))) {
    return SF_ERR_NULL_POINTER;
  }
  const ACC ident = op == SF_SLOT_SUM ? (ACC)0 : op == SF_SLOT_PROD ? (ACC)1
                    : op == SF_SLOT_MAX ? LOWEST : HIGHEST;
  const int64_t row = w + 1, part = nslots * row;
  for (int64_t s = s_begin; s < s_end; ++s) {
    const int64_t t = SF_FN(slot_count)(acc, nparts, part, s * row + w, n);
    if (t < 0) return SF_ERR_NOT_COALESCED;
    total[s] = t;
    const int64_t u = n - t;
    for (int64_t c = 0; c < w; ++c) {
      ACC a = ident;
      for (int64_t p = 0; p < nparts; ++p) {
        const ACC x = acc[p * part + s * row + c];
        switch (op) {
          case SF_SLOT_SUM: a += x; break;
          case SF_SLOT_PROD: a *= x; break;
          default:
            if (ISNAN(x) || (op == SF_SLOT_MAX ? x > a : x < a)) a = x;
        }
      }
      out[s * w + c] = (T)SF_FN(slot_fills)(a, (ACC)fill[c], u, op);
    }
  }
  return SF_OK;
}

/* Slots sorted (a reduction whose kept dims lead: the stored order is the
 * slots' order): each run of equal slots is reduced whole, in registers, and
 * written once; the slots before a run (and after the last one) hold nothing
 * and get the reduction of n fills. A range handles the runs that start in
 * it, whatever its ends, so any cut of [0, nse) gives the same bits. The
 * fill enters as in sf_slot_finish_*: once, after the stored rows, only
 * where u > 0. */
sf_status SF_FN(sf_slot_runs)(T *out, int64_t *total, const T *values, const int64_t *slot,
                              const T *fill, int64_t nse, int64_t k_begin, int64_t k_end,
                              int64_t nslots, int64_t w, int64_t n, int op) {
  sf_status st = check_slots(k_begin, k_end, nslots, w, op, HAS_PROD);
  if (st != SF_OK) return st;
  if (nse < 0 || n < 0) return SF_ERR_NEGATIVE_SIZE;
  if (k_end > nse) return SF_ERR_INVALID_ARGUMENT;
  if ((nslots > 0 && (total == NULL || (w > 0 && (out == NULL || fill == NULL)))) ||
      (nse > 0 && (slot == NULL || (w > 0 && values == NULL)))) {
    return SF_ERR_NULL_POINTER;
  }
  const ACC ident = op == SF_SLOT_SUM ? (ACC)0 : op == SF_SLOT_PROD ? (ACC)1
                    : op == SF_SLOT_MAX ? LOWEST : HIGHEST;
  /* The first run that starts in range; none when the range lies in one. */
  int64_t k = k_begin;
  if (k > 0) {
    while (k < k_end && slot[k] == slot[k - 1]) ++k;
  }
  while (k < k_end) {
    const int64_t s = slot[k], before = k > 0 ? slot[k - 1] : -1;
    if (s < 0) return SF_ERR_INDEX_NEGATIVE;
    if (s >= nslots) return SF_ERR_INDEX_OUT_OF_RANGE;
    if (s < before) return SF_ERR_NOT_COALESCED; /* not sorted: the caller's partials */
    int64_t e = k + 1;
    ACC run_sum = 0; /* sums of one value per row: found with the run's end */
    if (op == SF_SLOT_SUM && w == 1) {
      run_sum = SF_FN(sum_run4)(values, slot, s, k, &e, nse);
    } else {
      while (e < nse && slot[e] == s) ++e;
    }
    if (e - k > n) return SF_ERR_NOT_COALESCED; /* duplicates */
    const int64_t u = n - (e - k);
    /* empty slots: n fills each (from 0 at least: an invalid `before` is its own
     * run's error, found by the range that holds it) */
    for (int64_t g = before < 0 ? 0 : before + 1; g < s; ++g) {
      total[g] = 0;
      for (int64_t c = 0; c < w; ++c) {
        out[g * w + c] = (T)SF_FN(slot_fills)(ident, (ACC)fill[c], n, op);
      }
    }
    total[s] = e - k;
    if (w == 1 && (op == SF_SLOT_MAX || op == SF_SLOT_MIN)) {
      /* four branch-free lanes in T (a max is exact), NaN noted on the
       * side: it wins, as in the loop below */
      const int is_max = op == SF_SLOT_MAX;
      T m0 = values[k], m1 = m0, m2 = m0, m3 = m0;
      int nan = 0;
      int64_t j = k + 1;
      for (; j + 4 <= e; j += 4) {
        const T x0 = values[j], x1 = values[j + 1], x2 = values[j + 2], x3 = values[j + 3];
        m0 = (is_max ? x0 > m0 : x0 < m0) ? x0 : m0;
        m1 = (is_max ? x1 > m1 : x1 < m1) ? x1 : m1;
        m2 = (is_max ? x2 > m2 : x2 < m2) ? x2 : m2;
        m3 = (is_max ? x3 > m3 : x3 < m3) ? x3 : m3;
        nan |= ISNAN(x0) | ISNAN(x1) | ISNAN(x2) | ISNAN(x3);
      }
      for (; j < e; ++j) {
        m0 = (is_max ? values[j] > m0 : values[j] < m0) ? values[j] : m0;
        nan |= ISNAN(values[j]);
      }
      T m = (is_max ? m1 > m0 : m1 < m0) ? m1 : m0;
      m = (is_max ? m2 > m : m2 < m) ? m2 : m;
      m = (is_max ? m3 > m : m3 < m) ? m3 : m;
      const ACC a = (nan | ISNAN(values[k])) ? (ACC)NANV : (ACC)m;
      out[s] = (T)SF_FN(slot_fills)(a, (ACC)fill[0], u, op);
      k = e;
      continue;
    }
    if (op == SF_SLOT_SUM && w == 1) {
      out[s] = (T)SF_FN(slot_fills)(run_sum, (ACC)fill[0], u, op);
      k = e;
      continue;
    }
    /* a dense part (w > 1): the run's rows read in order, SF_RUN_COLS
     * columns at a time into registers, each column folded over the rows
     * in row order (the same sums as a column at a time), max/min by a
     * select: no branch on the data, a loop the compiler vectorizes */
    for (int64_t c0 = 0; c0 < w; c0 += SF_RUN_COLS) {
      const int64_t cw = w - c0 < SF_RUN_COLS ? w - c0 : SF_RUN_COLS;
      ACC a[SF_RUN_COLS];
      for (int64_t c = 0; c < cw; ++c) a[c] = ident;
      for (int64_t j = k; j < e; ++j) {
        const T *row = values + j * w + c0;
        switch (op) {
          case SF_SLOT_SUM:
            for (int64_t c = 0; c < cw; ++c) a[c] += (ACC)row[c];
            break;
          case SF_SLOT_PROD:
            for (int64_t c = 0; c < cw; ++c) a[c] *= (ACC)row[c];
            break;
          case SF_SLOT_MAX:
            for (int64_t c = 0; c < cw; ++c) {
              const ACC y = (ACC)row[c];
              a[c] = (y > a[c] || ISNAN(y)) ? y : a[c];
            }
            break;
          default:
            for (int64_t c = 0; c < cw; ++c) {
              const ACC y = (ACC)row[c];
              a[c] = (y < a[c] || ISNAN(y)) ? y : a[c];
            }
        }
      }
      for (int64_t c = 0; c < cw; ++c) {
        out[s * w + c0 + c] = (T)SF_FN(slot_fills)(a[c], (ACC)fill[c0 + c], u, op);
      }
    }
    k = e;
  }
  if (k_end == nse) { /* the slots after the last run */
    int64_t last = nse > 0 ? slot[nse - 1] : -1;
    if (last < -1) return SF_ERR_INDEX_NEGATIVE;
    if (last >= nslots) return SF_ERR_INDEX_OUT_OF_RANGE;
    for (int64_t g = last + 1; g < nslots; ++g) {
      total[g] = 0;
      for (int64_t c = 0; c < w; ++c) {
        out[g * w + c] = (T)SF_FN(slot_fills)(ident, (ACC)fill[c], n, op);
      }
    }
  }
  return SF_OK;
}
