"""Compiled voxel ray caster of the Engine (numba): textured colour, z-depth and instance ids in one pass.

Grid coordinates: ``x = X / VS + NX / 2``, ``h = G + (eye_ground - Y) / VS`` (height, up), ``z = Z / VS + NZ / 2``;
the world wraps around in x and z (a torus, so walks never reach an edge). Rays are traced with a two-level
Amanatides-Woo DDA: coarse blocks of ``B^3`` voxels with an occupancy flag are skipped whole, occupied blocks are
walked voxel by voxel. The ray parameter is the camera z-depth in metres, so the depth map needs no conversion.

Rays are traced on a coarse pixel grid (``SAMPLE``) and the pixels between are filled level by level from their
neighbours' hit planes (see :func:`_fill_row`), which cuts the traced rays several-fold on the large planar faces and
sky of a voxel world; ``sample=1`` traces every pixel. A traced fill pixel starts its walk just in front of its
neighbours' hits (see :func:`_trace_pixels`).

A voxel is drawn where its depth is below the view distance ``tmax`` (where the fog turns everything to sky), whichever
way the walk reached it. (Before, crossings were summed step by step: a wall at exactly ``tmax``, as a camera on the
grid facing along an axis sees, came out speckled, pixel by pixel, from rounding.)

Voxel visibility is dynamic per instance: mode 0 static; mode 1 (grow) shows a voxel while ``level <= state``;
mode 2 (vanish) shows it while ``level > state``. ``state`` and a colour tint are given per frame, which is how
Engine events progress whether or not they are in view.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .shade import shade_row

SAMPLE = 4  # rays are traced on a 4-pixel grid; pixels between are reconstructed level by level (see _fill_row)
#: a fill pixel that is traced starts at its nearest neighbour's hit depth less this share and these voxels, and no
#: deeper than where a voxel spans 4 S pixels (S: the spacing of its neighbours), so that nothing its neighbours' rays
#: could all miss (a post between them) lies before the start. Pixels that then differ from tracing from the camera,
#: over the 8 validation walks at 160 px (39 M pixels) / the 66 benchmark frames at 256 px (4.3 M): 3 / 1 at 4 S,
#: 25 / 7 at 2 S, 3487 / 144 with no such cap (whole posts and trunks missed)
START_MARGIN_REL = 0.05
START_MARGIN_VOXELS = 2.0
START_CAP_PX = 4.0


@njit(cache=True, error_model="numpy", fastmath=True, inline="always")
def _ray(u, v, R, fx, fy, cx, cy):
    dcx = (u + 0.5 - cx) / fx
    dcy = (v + 0.5 - cy) / fy
    return (R[0, 0] * dcx + R[0, 1] * dcy + R[0, 2], R[1, 0] * dcx + R[1, 1] * dcy + R[1, 2],
            R[2, 0] * dcx + R[2, 1] * dcy + R[2, 2])


# every kernel here and in shade.py is compiled with ``error_model="numpy"``: a float division by zero gives inf instead
# of a check and a branch per division for Python's ZeroDivisionError (never raised here: the frames are byte-identical)

#: fastmath without "arcp": in a loop over rays LLVM would turn ``d / vs`` into ``d * (1 / vs)`` with the reciprocal
#: hoisted, which moves a few hits by an ulp (185 of 4.3 M pixels over 66 frames); the other flags are as before
_FASTMATH_TRACE = {"nnan", "ninf", "nsz", "contract", "afn", "reassoc"}


@njit(cache=True, error_model="numpy", fastmath=_FASTMATH_TRACE, inline="always")
def _crossing(g, ig, b, s, o, size, big):
    """Along one axis: the ray parameter at which a ray (direction g, ig = 1 / g, origin o) in cell b of a grid of
    ``size``-wide cells, stepping s, first crosses a cell boundary; ``big`` when the ray runs parallel to the axis.
    Scalars only (see _trace_pixels on arrays)."""
    if g != 0:
        return ((b + (1 if s > 0 else 0)) * size - o) * ig
    return big


@njit(cache=True, error_model="numpy", fastmath=_FASTMATH_TRACE, inline="always")
def _block_at(o, g, ig, s, t, big):
    """Along one axis: the block (edge B = 4 voxels, as the bit layout of ``bits`` needs) holding the ray's point at
    parameter t, and the parameter of the ray's next crossing out of it (a walk's start, or its landing after an
    empty-space jump)."""
    # floor(p / 4) as floor(p) >> 2: 4 is a power of two, so p / 4 is exact and both floors agree; a shift costs less
    # than a division
    b = int(math.floor(o + t * g)) >> 2
    return b, _crossing(g, ig, b, s, o, 4, big)


@njit(cache=True, error_model="numpy", fastmath=_FASTMATH_TRACE)
def _trace_pixels(v, us, t0s, n, mat, inst, level, occ, bits, B, G, inst_mode, inst_state, R, ox, oh, oz, vs, fx, fy,
                  cx, cy, tmax, hits_t, hits_i):
    """Trace the rays of pixels (us[:n], v) and store each hit: t (< 0 for sky), face axis, wrapped voxel x, h, z and
    the integer grid plane of the face (-1 for sky). Voxel hits are kept for t < tmax, whichever way the walk came.

    Ray q starts at depth ``t0s[q]`` (0: at the camera): a fill pixel's trace starts a little in front of its nearest
    neighbour's hit (see :func:`_fill_row`), skipping the empty space every ray crosses first. Where the voxel at that
    start is solid the hit lies before it, and the ray is traced again from the camera. Every crossing is computed from
    its cell's index (not summed step by step), so a ray finds the same t whichever cell its walk starts in.

    ``bits`` holds each 4x4x4 block's voxels as one uint64 (bit ``16 lx + 4 lh + lz``), so walking a block reads
    no voxel memory until a candidate hit. ``occ`` holds, per coarse block, the Chebyshev distance (in blocks) to the
    nearest occupied block: 0 means the block itself holds voxels (walk it), d >= 2 lets the ray jump a (2d-1)^3 empty
    box at once. The ground slab (every voxel below height ``G``) is left out of ``occ`` and hit analytically at the
    plane h = G.

    One call per row with the walk written into the loop, and no helper taking an array on the way: numba counts the
    references to every array a compiled function is handed (an atomic add and subtract each, per call), which at a
    call per ray and an inlined voxel test per candidate took ~40 % of a frame."""
    NX, NH, NZ = mat.shape
    mx = NX - 1
    mz = NZ - 1
    NBX = NX // B
    NBH = NH // B
    NBZ = NZ // B
    mbx = NBX - 1
    mbz = NBZ - 1
    big = 1e30
    ivs = 1.0 / vs
    vs_pow2 = math.frexp(vs)[0] == 0.5  # the voxel size is a power of two (0.25 m): x / vs == x * (1 / vs) exactly
    again = False  # ray q hit at its start depth: trace it again from the camera
    q = 0
    while q < n:
        u = us[q]
        dX, dY, dZ = _ray(u, v, R, fx, fy, cx, cy)
        gx = dX * ivs if vs_pow2 else dX / vs
        gh = -dY * ivs if vs_pow2 else -dY / vs
        gz = dZ * ivs if vs_pow2 else dZ / vs
        t = -1.0  # the hit (sky unless one is found)
        face = 0
        x = 0
        h = 0
        z = 0
        done = False
        sx = 1 if gx > 0 else -1
        sh = 1 if gh > 0 else -1
        sz = 1 if gz > 0 else -1
        igx = 1.0 / gx if gx != 0 else big
        igh = 1.0 / gh if gh != 0 else big
        igz = 1.0 / gz if gz != 0 else big
        t_ground = (G - oh) * igh if gh < 0 else big
        t_end = min(tmax, t_ground)
        ts = 0.0 if again else t0s[q]
        if ts >= t_end:
            ts = 0.0
        again = False
        # coarse walk, from the block of the start point
        bx, tcx = _block_at(ox, gx, igx, sx, ts, big)
        bh, tch = _block_at(oh, gh, igh, sh, ts, big)
        bz, tcz = _block_at(oz, gz, igz, sz, ts, big)
        t_enter = ts
        entry = 1  # the axis of the face through which the ray entered the current block
        while t_enter < t_end:
            if bh >= NBH:
                if sh > 0:
                    done = True  # above the world, rising: sky
                    break
            elif bh < 0:
                if sh < 0:
                    done = True
                    break
            elif occ[bx & mbx, bh, bz & mbz] >= 2:
                # empty-space skip: every block within (d - 1) blocks (Chebyshev) is empty, so jump to the far side
                d = occ[bx & mbx, bh, bz & mbz]
                ex = (((bx + d) if sx > 0 else (bx - d + 1)) * B - ox) * igx if gx != 0 else big
                eh = (((bh + d) if sh > 0 else (bh - d + 1)) * B - oh) * igh if gh != 0 else big
                ez = (((bz + d) if sz > 0 else (bz - d + 1)) * B - oz) * igz if gz != 0 else big
                if min(ex, min(eh, ez)) >= t_end:
                    break
                if ex < eh and ex < ez:
                    t_enter = ex
                    entry = 0
                elif eh < ez:
                    t_enter = eh
                    entry = 1
                else:
                    t_enter = ez
                    entry = 2
                te = t_enter + 1e-7
                bx, tcx = _block_at(ox, gx, igx, sx, te, big)
                bh, tch = _block_at(oh, gh, igh, sh, te, big)
                bz, tcz = _block_at(oz, gz, igz, sz, te, big)
                continue
            elif occ[bx & mbx, bh, bz & mbz] == 0:
                # fine walk inside this block, from the entry point
                px = ox + t_enter * gx
                ph = oh + t_enter * gh
                pz = oz + t_enter * gz
                x0 = bx * B
                h0 = bh * B
                z0 = bz * B
                wx = min(max(int(math.floor(px)), x0), x0 + B - 1)
                wh = min(max(int(math.floor(ph)), h0), h0 + B - 1)
                wz = min(max(int(math.floor(pz)), z0), z0 + B - 1)
                tfx = _crossing(gx, igx, wx, sx, ox, 1, big)
                tfh = _crossing(gh, igh, wh, sh, oh, 1, big)
                tfz = _crossing(gz, igz, wz, sz, oz, 1, big)
                tf = t_enter
                ff = entry
                m64 = bits[bx & mbx, bh, bz & mbz]
                while True:
                    bit = np.uint64(((wx - x0) << 4) | ((wh - h0) << 2) | (wz - z0))
                    if (m64 >> bit) & np.uint64(1):
                        # the voxel is there; is it shown now (see the module docstring)?
                        vx = wx & mx
                        vz = wz & mz
                        solid = mat[vx, wh, vz] != 0
                        if solid:
                            ii = inst[vx, wh, vz]
                            mode = inst_mode[ii]
                            if mode == 1:
                                solid = level[vx, wh, vz] <= inst_state[ii]
                            elif mode != 0:
                                solid = level[vx, wh, vz] > inst_state[ii]
                        if solid:
                            if tf >= t_end:
                                break
                            t, face, x, h, z = tf, ff, vx, wh, vz
                            done = True
                            again = tf <= ts and ts > 0  # solid at the start point: the hit lies before it
                            break
                    if tfx < tfh and tfx < tfz:
                        tf = tfx
                        wx += sx
                        tfx = ((wx + 1 if sx > 0 else wx) - ox) * igx
                        ff = 0
                        if wx < x0 or wx >= x0 + B:
                            break
                    elif tfh < tfz:
                        tf = tfh
                        wh += sh
                        tfh = ((wh + 1 if sh > 0 else wh) - oh) * igh
                        ff = 1
                        if wh < h0 or wh >= h0 + B:
                            break
                    else:
                        tf = tfz
                        wz += sz
                        tfz = ((wz + 1 if sz > 0 else wz) - oz) * igz
                        ff = 2
                        if wz < z0 or wz >= z0 + B:
                            break
                if done:
                    break
            # coarse step
            if tcx < tch and tcx < tcz:
                t_enter = tcx
                bx += sx
                tcx = ((bx + 1 if sx > 0 else bx) * B - ox) * igx
                entry = 0
            elif tch < tcz:
                t_enter = tch
                bh += sh
                tch = ((bh + 1 if sh > 0 else bh) * B - oh) * igh
                entry = 1
            else:
                t_enter = tcz
                bz += sz
                tcz = ((bz + 1 if sz > 0 else bz) * B - oz) * igz
                entry = 2
        if again:
            continue
        if not done and t_ground <= tmax:
            t, face, x, h, z = (t_ground, 1, int(math.floor(ox + t_ground * gx)) & mx, G - 1,
                                int(math.floor(oz + t_ground * gz)) & mz)
        hits_t[v, u] = t
        hits_i[v, u, 0] = face
        hits_i[v, u, 1] = x
        hits_i[v, u, 2] = h
        hits_i[v, u, 3] = z
        # the integer grid plane (along the hit face's axis) the ray hit; -1 for sky
        if t < 0:
            hits_i[v, u, 4] = -1
        elif face == 0:
            hits_i[v, u, 4] = int(math.floor(ox + t * dX / vs + 0.5))
        elif face == 1:
            hits_i[v, u, 4] = int(math.floor(oh - t * dY / vs + 0.5))
        else:
            hits_i[v, u, 4] = int(math.floor(oz + t * dZ / vs + 0.5))
        q += 1


@njit(cache=True, error_model="numpy", fastmath=True)
def _fill_row(v, S, mat, inst, level, occ, bits, B, G, inst_mode, inst_state, R, ox, oh, oz, vs, fx, fy, cx, cy, tmax,
              hits_t, hits_i):
    """Fill row v's pixels of the S-spaced grid that are not on the 2S-spaced grid filled before.

    Where every neighbouring 2S-grid pixel hit the same exposed face plane, intersect this pixel's ray with that plane
    and accept it if the voxel there is solid and its front neighbour empty; where every neighbour sees sky, so does
    this pixel; otherwise trace it, from a depth in front of its nearest neighbour's hit (see START_MARGIN_REL) when
    every neighbour is in the frame. Exact except for geometry thinner than the sample spacing lying in front of a
    plane or against the sky (measured: ~0.01 % of pixels at a 4-pixel grid)."""
    H, W = hits_t.shape
    NX, NH, NZ = mat.shape
    o = np.empty(3)
    o[0] = ox
    o[1] = oh
    o[2] = oz
    nb = np.empty((4, 2), np.int64)
    us = np.empty(W, np.int64)  # the pixels left to trace, traced together at the end of the row (a level reads only
    n = 0  # the coarser grid, so the order does not matter)
    t0s = np.empty(W)  # ... and the depth each one's trace starts at
    S2 = 2 * S
    big = 1e30
    t_cap = vs * min(fx, fy) / (START_CAP_PX * S)  # the depth at which a voxel spans START_CAP_PX * S pixels
    m2 = S2 - 1  # sizes are powers of two: masks, not divisions (an integer division per use, several per pixel)
    mx = NX - 1
    mz = NZ - 1
    for u in range(0, W, S):
        if v & m2 == 0 and u & m2 == 0:
            continue
        k = 0
        if v & m2 == 0:
            nb[0, 0], nb[0, 1], nb[1, 0], nb[1, 1] = v, u - S, v, u + S
            k = 2
        elif u & m2 == 0:
            nb[0, 0], nb[0, 1], nb[1, 0], nb[1, 1] = v - S, u, v + S, u
            k = 2
        else:
            nb[0, 0], nb[0, 1], nb[1, 0], nb[1, 1] = v - S, u - S, v - S, u + S
            nb[2, 0], nb[2, 1], nb[3, 0], nb[3, 1] = v + S, u - S, v + S, u + S
            k = 4
        ok = True
        for j in range(k):
            if nb[j, 0] >= H or nb[j, 1] >= W:
                ok = False
                break
        plane = -1
        face = -1
        if ok and hits_t[nb[0, 0], nb[0, 1]] < 0:  # all neighbours see sky: so does this pixel
            sky = True
            for j in range(1, k):
                if hits_t[nb[j, 0], nb[j, 1]] >= 0:
                    sky = False
            if sky:
                hits_t[v, u] = -1.0
                hits_i[v, u, 4] = -1
                hits_i[v, u, 0] = 0
                hits_i[v, u, 1] = 0
                hits_i[v, u, 2] = 0
                hits_i[v, u, 3] = 0
                continue
        if ok:
            face = hits_i[nb[0, 0], nb[0, 1], 0]
            plane = hits_i[nb[0, 0], nb[0, 1], 4]
            if plane < 0:
                ok = False
            for j in range(1, k):
                if not ok:
                    break
                if hits_i[nb[j, 0], nb[j, 1], 0] != face or hits_i[nb[j, 0], nb[j, 1], 4] != plane:
                    ok = False
        if ok:
            dX, dY, dZ = _ray(u, v, R, fx, fy, cx, cy)
            gx, gh, gz = dX / vs, -dY / vs, dZ / vs
            ga = gx if face == 0 else (gh if face == 1 else gz)
            if ga == 0.0:
                ok = False
            else:
                t = (plane - o[face]) / ga
                step = 1 if ga > 0 else -1
                px = int(math.floor(ox + t * gx))
                ph = int(math.floor(oh + t * gh))
                pz = int(math.floor(oz + t * gz))
                if face == 0:
                    px = plane if step > 0 else plane - 1
                elif face == 1:
                    ph = plane if step > 0 else plane - 1
                else:
                    pz = plane if step > 0 else plane - 1
                fx_, fh_, fz_ = px, ph, pz  # the voxel in front of the face
                if face == 0:
                    fx_ = px - step
                elif face == 1:
                    fh_ = ph - step
                else:
                    fz_ = pz - step
                # every neighbour hit this very voxel through this face: it is solid and the voxel in front of it
                # empty (each neighbour's trace or fill tested both), so the tests below would pass; the ground slab's
                # hits are analytic (their voxel untested): those keep the voxel test
                same = True
                for j in range(k):
                    if hits_i[nb[j, 0], nb[j, 1], 1] != px & mx or hits_i[nb[j, 0], nb[j, 1], 2] != ph or \
                            hits_i[nb[j, 0], nb[j, 1], 3] != pz & mz:
                        same = False
                        break
                if t <= 0 or t > tmax or ph < 0 or ph >= NH or fh_ < 0 or fh_ >= NH:
                    ok = False
                elif not same or ph == G - 1:
                    # the voxel must be shown (see the module docstring) and, unless every neighbour hit it, the one
                    # in front of it not: the test written out, as in _trace_pixels
                    for q in range(1 if same else 2):
                        wx = (px if q == 0 else fx_) & mx
                        wh = ph if q == 0 else fh_
                        wz = (pz if q == 0 else fz_) & mz
                        solid = mat[wx, wh, wz] != 0
                        if solid:
                            ii = inst[wx, wh, wz]
                            mode = inst_mode[ii]
                            if mode == 1:
                                solid = level[wx, wh, wz] <= inst_state[ii]
                            elif mode != 0:
                                solid = level[wx, wh, wz] > inst_state[ii]
                        if solid != (q == 0):
                            ok = False
                            break
                if ok:
                    hits_t[v, u] = t
                    hits_i[v, u, 0] = face
                    hits_i[v, u, 1] = px & mx
                    hits_i[v, u, 2] = ph
                    hits_i[v, u, 3] = pz & mz
                    hits_i[v, u, 4] = plane
        if not ok:
            # start in front of the nearest neighbour's hit; from the camera when a neighbour is outside the frame
            tm = big
            for j in range(k):
                if nb[j, 0] >= H or nb[j, 1] >= W:
                    tm = 0.0
                    break
                tj = hits_t[nb[j, 0], nb[j, 1]]
                if 0 <= tj < tm:
                    tm = tj
            tm = min(tm * (1.0 - START_MARGIN_REL) - START_MARGIN_VOXELS * vs, t_cap)
            us[n] = u
            t0s[n] = tm if 0 < tm < big else 0.0
            n += 1
    _trace_pixels(v, us, t0s, n, mat, inst, level, occ, bits, B, G, inst_mode, inst_state, R, ox, oh, oz, vs, fx, fy,
                  cx, cy, tmax, hits_t, hits_i)


@njit(cache=True, error_model="numpy", fastmath=True)
def _sample_row(v, sample, mat, inst, level, occ, bits, B, G, inst_mode, inst_state, R, ox, oh, oz, vs, fx, fy, cx, cy,
                tmax, hits_t, hits_i):
    us = np.arange(0, hits_t.shape[1], sample)
    _trace_pixels(v, us, np.zeros(len(us)), len(us), mat, inst, level, occ, bits, B, G, inst_mode, inst_state, R, ox,
                  oh, oz, vs, fx, fy, cx, cy, tmax, hits_t, hits_i)


@njit(cache=True, error_model="numpy", fastmath=True)
def render_frame(mat, inst, level, occ, bits, B, G, palette, texkind, inst_mode, inst_state, inst_tint, R, ox, oh,
                 oz, vs, fx, fy, cx, cy, tmax, fog_start, sky_top, sky_horizon, clouds, rgb, depth, ids, sample=SAMPLE):
    """Render on one core (the benchmark's number). ``sample`` (a power of two) is the ray grid; 1 traces every
    pixel."""
    H, W = depth.shape
    hits_t = np.empty((H, W))
    hits_i = np.empty((H, W, 5), np.int32)  # face, voxel x, h, z, plane: all small
    for v in range(0, H, sample):
        _sample_row(v, sample, mat, inst, level, occ, bits, B, G, inst_mode, inst_state, R, ox, oh, oz, vs, fx, fy, cx, cy,
                    tmax, hits_t, hits_i)
    S = sample // 2
    while S >= 1:
        for v in range(0, H, S):
            _fill_row(v, S, mat, inst, level, occ, bits, B, G, inst_mode, inst_state, R, ox, oh, oz, vs, fx, fy, cx,
                      cy, tmax, hits_t, hits_i)
        S //= 2
    for v in range(H):
        shade_row(v, mat, inst, palette, texkind, inst_tint, R, ox, oh, oz, vs, fx, fy, cx, cy, tmax, fog_start,
                   sky_top, sky_horizon, clouds, hits_t, hits_i, rgb, depth, ids)


@njit(cache=True, error_model="numpy", fastmath=True, parallel=True)
def render_frame_parallel(mat, inst, level, occ, bits, B, G, palette, texkind, inst_mode, inst_state, inst_tint, R,
                          ox, oh, oz, vs, fx, fy, cx, cy, tmax, fog_start, sky_top, sky_horizon, clouds, rgb, depth,
                          ids, sample=SAMPLE):
    """The same frame as :func:`render_frame`, rows spread over all numba threads."""
    H, W = depth.shape
    hits_t = np.empty((H, W))
    hits_i = np.empty((H, W, 5), np.int32)  # face, voxel x, h, z, plane: all small
    for j in prange((H + sample - 1) // sample):
        _sample_row(sample * j, sample, mat, inst, level, occ, bits, B, G, inst_mode, inst_state, R, ox, oh, oz, vs, fx, fy,
                    cx, cy, tmax, hits_t, hits_i)
    S = sample // 2
    while S >= 1:
        for j in prange((H + S - 1) // S):
            _fill_row(S * j, S, mat, inst, level, occ, bits, B, G, inst_mode, inst_state, R, ox, oh, oz, vs, fx, fy,
                      cx, cy, tmax, hits_t, hits_i)
        S //= 2
    for v in prange(H):
        shade_row(v, mat, inst, palette, texkind, inst_tint, R, ox, oh, oz, vs, fx, fy, cx, cy, tmax, fog_start,
                   sky_top, sky_horizon, clouds, hits_t, hits_i, rgb, depth, ids)
