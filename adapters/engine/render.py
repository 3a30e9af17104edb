"""Compiled voxel ray caster of the Engine (numba): textured colour, z-depth and instance ids in one pass.

Grid coordinates: ``x = X / VS + NX / 2``, ``h = G + (eye_ground - Y) / VS`` (height, up), ``z = Z / VS + NZ / 2``;
the world wraps around in x and z (a torus, so walks never reach an edge). Rays are traced with a two-level
Amanatides-Woo DDA: coarse blocks of ``B^3`` voxels with an occupancy flag are skipped whole, occupied blocks are
walked voxel by voxel. The ray parameter is the camera z-depth in metres, so the depth map needs no conversion.

Rays are traced on a coarse pixel grid (``SAMPLE``) and the pixels between are filled level by level from their
neighbours' hit planes (see :func:`_fill_row`), which cuts the traced rays several-fold on the large planar faces and
sky of a voxel world; ``sample=1`` traces every pixel.

Voxel visibility is dynamic per instance: mode 0 static; mode 1 (grow) shows a voxel while ``level <= state``;
mode 2 (vanish) shows it while ``level > state``. ``state`` and a colour tint are given per frame, which is how
Engine events progress whether or not they are in view.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

TEX = 4  # texels per voxel face edge
SAMPLE = 4  # rays are traced on a 4-pixel grid; pixels between are reconstructed level by level (see _fill_row)

# texture kinds
TK_NOISE, TK_BRICK, TK_PLANK, TK_GRASS, TK_PLAIN, TK_FACADE, TK_STRIPE, TK_LEAF = range(8)


@njit(cache=True, inline="always")
def _hash(a, b, c, d):
    h = (a * 73856093) ^ (b * 19349663) ^ (c * 83492791) ^ (d * 2654435761)
    h = (h ^ (h >> 13)) * 1274126177
    h = h ^ (h >> 16)
    return (h & 0xFFFF) / 65536.0


@njit(cache=True, fastmath=True)
def _value_noise(u, v, seed):
    iu = math.floor(u)
    iv = math.floor(v)
    fu = u - iu
    fv = v - iv
    fu = fu * fu * (3.0 - 2.0 * fu)
    fv = fv * fv * (3.0 - 2.0 * fv)
    a = _hash(np.int64(iu), np.int64(iv), seed, 7)
    b = _hash(np.int64(iu) + 1, np.int64(iv), seed, 7)
    c = _hash(np.int64(iu), np.int64(iv) + 1, seed, 7)
    d = _hash(np.int64(iu) + 1, np.int64(iv) + 1, seed, 7)
    return (a * (1 - fu) + b * fu) * (1 - fv) + (c * (1 - fu) + d * fu) * fv


@njit(cache=True, fastmath=True, inline="always")
def _sample_wrap(tex, u, v):
    """Bilinear sample of a periodic 2D texture at texel coordinates (u, v)."""
    n0, n1 = tex.shape
    fu = math.floor(u)
    fv = math.floor(v)
    a = u - fu
    b = v - fv
    i0 = int(fu) % n0
    j0 = int(fv) % n1
    i1 = (i0 + 1) % n0
    j1 = (j0 + 1) % n1
    return ((tex[i0, j0] * (1 - a) + tex[i1, j0] * a) * (1 - b) + (tex[i0, j1] * (1 - a) + tex[i1, j1] * a) * b)


@njit(cache=True, inline="always")
def _solid(mat, inst, level, inst_mode, inst_state, x, h, z):
    m = mat[x, h, z]
    if m == 0:
        return False
    i = inst[x, h, z]
    mode = inst_mode[i]
    if mode == 0:
        return True
    if mode == 1:
        return level[x, h, z] <= inst_state[i]
    return level[x, h, z] > inst_state[i]


@njit(cache=True, fastmath=True, inline="always")
def _trace(mat, inst, level, occ, bits, B, G, inst_mode, inst_state, ox, oh, oz, gx, gh, gz, tmax):
    """Returns (t_hit, face_axis, x, h, z) with wrapped x, z; t_hit < 0 when nothing is hit before tmax.

    ``bits`` holds each 4x4x4 block's voxels as one uint64 (bit ``16 lx + 4 lh + lz``), so walking a block reads
    no voxel memory until a candidate hit. ``occ`` holds, per coarse block, the Chebyshev distance (in blocks) to the nearest occupied block: 0 means the
    block itself holds voxels (walk it), d >= 2 lets the ray jump a (2d-1)^3 empty box at once. The ground slab
    (every voxel below height ``G``) is left out of ``occ`` and hit analytically at the plane h = G."""
    NX, NH, NZ = mat.shape
    mx = NX - 1
    mz = NZ - 1
    NBX = NX // B
    NBH = NH // B
    NBZ = NZ // B
    mbx = NBX - 1
    mbz = NBZ - 1
    big = 1e30
    sx = 1 if gx > 0 else -1
    sh = 1 if gh > 0 else -1
    sz = 1 if gz > 0 else -1
    igx = 1.0 / gx if gx != 0 else big
    igh = 1.0 / gh if gh != 0 else big
    igz = 1.0 / gz if gz != 0 else big
    # coarse walk
    bx = int(math.floor(ox / B))
    bh = int(math.floor(oh / B))
    bz = int(math.floor(oz / B))
    if gx != 0:
        tcx = ((bx + (1 if sx > 0 else 0)) * B - ox) * igx
        dcx = B * abs(igx)
    else:
        tcx = big
        dcx = big
    if gh != 0:
        tch = ((bh + (1 if sh > 0 else 0)) * B - oh) * igh
        dch = B * abs(igh)
    else:
        tch = big
        dch = big
    if gz != 0:
        tcz = ((bz + (1 if sz > 0 else 0)) * B - oz) * igz
        dcz = B * abs(igz)
    else:
        tcz = big
        dcz = big
    t_ground = (G - oh) * igh if gh < 0 else big
    t_end = min(tmax, t_ground)
    t_enter = 0.0
    face = 1
    while t_enter <= t_end:
        if bh >= NBH:
            if sh > 0:
                return -1.0, 0, 0, 0, 0
        elif bh < 0:
            if sh < 0:
                return -1.0, 0, 0, 0, 0
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
                face = 0
            elif eh < ez:
                t_enter = eh
                face = 1
            else:
                t_enter = ez
                face = 2
            te = t_enter + 1e-7
            bx = int(math.floor((ox + te * gx) / B))
            bh = int(math.floor((oh + te * gh) / B))
            bz = int(math.floor((oz + te * gz) / B))
            tcx = ((bx + (1 if sx > 0 else 0)) * B - ox) * igx if gx != 0 else big
            tch = ((bh + (1 if sh > 0 else 0)) * B - oh) * igh if gh != 0 else big
            tcz = ((bz + (1 if sz > 0 else 0)) * B - oz) * igz if gz != 0 else big
            continue
        elif occ[bx & mbx, bh, bz & mbz] == 0:
            # fine walk inside this block, from the entry point
            px = ox + t_enter * gx
            ph = oh + t_enter * gh
            pz = oz + t_enter * gz
            x0 = bx * B
            h0 = bh * B
            z0 = bz * B
            cx = min(max(int(math.floor(px)), x0), x0 + B - 1)
            ch = min(max(int(math.floor(ph)), h0), h0 + B - 1)
            cz = min(max(int(math.floor(pz)), z0), z0 + B - 1)
            tfx = ((cx + (1 if sx > 0 else 0)) - ox) * igx if gx != 0 else big
            tfh = ((ch + (1 if sh > 0 else 0)) - oh) * igh if gh != 0 else big
            tfz = ((cz + (1 if sz > 0 else 0)) - oz) * igz if gz != 0 else big
            dfx = abs(igx) if gx != 0 else big
            dfh = abs(igh) if gh != 0 else big
            dfz = abs(igz) if gz != 0 else big
            tf = t_enter
            ff = face
            m64 = bits[bx & mbx, bh, bz & mbz]
            while True:
                bit = np.uint64(((cx - x0) << 4) | ((ch - h0) << 2) | (cz - z0))
                if (m64 >> bit) & np.uint64(1) and _solid(mat, inst, level, inst_mode, inst_state, cx & mx, ch, cz & mz):
                    if tf > t_end:
                        break
                    return tf, ff, cx & mx, ch, cz & mz
                if tfx < tfh and tfx < tfz:
                    tf = tfx
                    tfx += dfx
                    cx += sx
                    ff = 0
                    if cx < x0 or cx >= x0 + B:
                        break
                elif tfh < tfz:
                    tf = tfh
                    tfh += dfh
                    ch += sh
                    ff = 1
                    if ch < h0 or ch >= h0 + B:
                        break
                else:
                    tf = tfz
                    tfz += dfz
                    cz += sz
                    ff = 2
                    if cz < z0 or cz >= z0 + B:
                        break
        # coarse step
        if tcx < tch and tcx < tcz:
            t_enter = tcx
            tcx += dcx
            bx += sx
            face = 0
        elif tch < tcz:
            t_enter = tch
            tch += dch
            bh += sh
            face = 1
        else:
            t_enter = tcz
            tcz += dcz
            bz += sz
            face = 2
    if t_ground <= tmax:
        return (t_ground, 1, int(math.floor(ox + t_ground * gx)) & mx, G - 1,
                int(math.floor(oz + t_ground * gz)) & mz)
    return -1.0, 0, 0, 0, 0


@njit(cache=True, fastmath=True)
def _shade_row(v, mat, inst, palette, texkind, inst_tint, R, ox, oh, oz, vs, fx, fy, cx, cy, tmax, fog_start,
               sky_top, sky_horizon, clouds, hits_t, hits_i, rgb, depth, ids):
    """Colour, depth and ids of row v from its hits (t < 0: sky)."""
    W = depth.shape[1]
    if True:
        dcy = (v + 0.5 - cy) / fy
        for u in range(W):
            dcx = (u + 0.5 - cx) / fx
            dX = R[0, 0] * dcx + R[0, 1] * dcy + R[0, 2]
            dY = R[1, 0] * dcx + R[1, 1] * dcy + R[1, 2]
            dZ = R[2, 0] * dcx + R[2, 1] * dcy + R[2, 2]
            dn = math.sqrt(dX * dX + dY * dY + dZ * dZ)
            t = hits_t[v, u]
            face = hits_i[v, u, 0]
            x = hits_i[v, u, 1]
            h = hits_i[v, u, 2]
            z = hits_i[v, u, 3]
            # sky colour for this direction (also the fog colour)
            el = -dY / dn
            s = min(max(el * 2.5, 0.0), 1.0)
            sr = sky_horizon[0] + (sky_top[0] - sky_horizon[0]) * s
            sg = sky_horizon[1] + (sky_top[1] - sky_horizon[1]) * s
            sb = sky_horizon[2] + (sky_top[2] - sky_horizon[2]) * s
            if t < 0:
                if el > 0.015:
                    k = 3.0 / (-dY)
                    cl = _sample_wrap(clouds, dX * k * 8.0, dZ * k * 8.0)
                    c = min(max((cl - 0.45) * 2.2, 0.0), 1.0) * min(el * 6.0, 1.0)
                    sr = sr + (1.0 - sr) * c
                    sg = sg + (1.0 - sg) * c
                    sb = sb + (1.0 - sb) * c
                rgb[v, u, 0] = np.uint8(min(sr, 1.0) * 255.0)
                rgb[v, u, 1] = np.uint8(min(sg, 1.0) * 255.0)
                rgb[v, u, 2] = np.uint8(min(sb, 1.0) * 255.0)
                depth[v, u] = np.inf
                ids[v, u] = 0
                continue
            m = mat[x, h, z]
            iid = inst[x, h, z]
            # texture coordinates on the hit face
            px = ox + t * dX / vs
            ph = oh - t * dY / vs
            pz = oz + t * dZ / vs
            if face == 0:
                a = ph
                b = pz
            elif face == 1:
                a = px
                b = pz
            else:
                a = px
                b = ph
            fa = a - math.floor(a)
            fb = b - math.floor(b)
            tu = min(int(fa * TEX), TEX - 1)
            tv = min(int(fb * TEX), TEX - 1)
            xi = np.int64(x)
            hi = np.int64(h)
            zi = np.int64(z)
            n = _hash(xi, hi, zi, np.int64(tu * 16 + tv + face * 256))
            vox = _hash(xi, hi, zi, np.int64(99))
            kind = texkind[m]
            f = 0.8 + 0.24 * n + 0.12 * (vox - 0.5)
            if kind == TK_BRICK:
                row = (h * TEX + tv) if face != 1 else tv
                along = (x if face == 2 else z) * TEX + tu
                if face == 1:
                    along = tu
                if row % 2 == 0 or (along + (row // 2 % 2) * 2) % 4 == 0:
                    f = 0.55 + 0.1 * n
                else:
                    f = 0.85 + 0.25 * n
            elif kind == TK_PLANK:
                f = 0.7 + 0.25 * _hash(xi, hi, zi, np.int64(tv)) + 0.1 * n
                if tv == 0:
                    f = 0.5
            elif kind == TK_GRASS:
                blob = _hash(xi >> 2, np.int64(0), zi >> 2, np.int64(5))
                f = 0.65 + 0.35 * n + 0.2 * (blob - 0.5)
            elif kind == TK_PLAIN:
                f = 0.9 + 0.12 * n
            elif kind == TK_FACADE:
                if face != 1 and h % 4 != 0 and (x + z) % 3 != 0:
                    # window glass: dark, reflective gradient
                    f = 0.25 + 0.2 * fb + 0.08 * n
                else:
                    f = 0.8 + 0.2 * n
            elif kind == TK_STRIPE:
                f = 1.0 if ((tu + tv) // 2) % 2 == 0 else 0.6
                f += 0.1 * n
            elif kind == TK_LEAF:
                f = 0.55 + 0.5 * n * n + 0.15 * vox
            # texture level of detail: texels smaller than ~2 pixels fade to their mean instead of aliasing
            # (shimmering texture would make flow and tracking fail on what is a perfectly rigid world)
            texel_px = (vs / TEX) * fx / t
            lod = min(max((texel_px - 0.8) / 1.7, 0.0), 1.0)
            vox_px = vs * fx / t
            lod_v = min(max((vox_px - 0.8) / 1.7, 0.0), 1.0)
            f = 0.9 + (f - 0.9) * (lod + (1.0 - lod) * 0.5 * lod_v)
            # face shading (a fixed sun)
            if face == 1:
                sh = 1.0 if dY > 0 else 0.5
            elif face == 0:
                sh = 0.82 if dX < 0 else 0.68
            else:
                sh = 0.9 if dZ < 0 else 0.62
            cr = palette[m, 0] * inst_tint[iid, 0] * f * sh
            cg = palette[m, 1] * inst_tint[iid, 1] * f * sh
            cb = palette[m, 2] * inst_tint[iid, 2] * f * sh
            dist = t * dn
            fog = (dist - fog_start) / (tmax * dn - fog_start) if dist > fog_start else 0.0
            fog = min(max(fog, 0.0), 1.0)
            fog = fog * fog
            cr = cr * (1 - fog) + sr * fog
            cg = cg * (1 - fog) + sg * fog
            cb = cb * (1 - fog) + sb * fog
            rgb[v, u, 0] = np.uint8(min(max(cr, 0.0), 1.0) * 255.0)
            rgb[v, u, 1] = np.uint8(min(max(cg, 0.0), 1.0) * 255.0)
            rgb[v, u, 2] = np.uint8(min(max(cb, 0.0), 1.0) * 255.0)
            depth[v, u] = t
            ids[v, u] = iid


@njit(cache=True, fastmath=True, inline="always")
def _ray(u, v, R, fx, fy, cx, cy):
    dcx = (u + 0.5 - cx) / fx
    dcy = (v + 0.5 - cy) / fy
    return (R[0, 0] * dcx + R[0, 1] * dcy + R[0, 2], R[1, 0] * dcx + R[1, 1] * dcy + R[1, 2],
            R[2, 0] * dcx + R[2, 1] * dcy + R[2, 2])


@njit(cache=True, fastmath=True)
def _trace_into(u, v, mat, inst, level, occ, bits, B, G, inst_mode, inst_state, R, ox, oh, oz, vs, fx, fy, cx, cy,
                tmax, hits_t, hits_i):
    dX, dY, dZ = _ray(u, v, R, fx, fy, cx, cy)
    t, face, x, h, z = _trace(mat, inst, level, occ, bits, B, G, inst_mode, inst_state, ox, oh, oz,
                              dX / vs, -dY / vs, dZ / vs, tmax)
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


@njit(cache=True, fastmath=True)
def _fill_row(v, S, mat, inst, level, occ, bits, B, G, inst_mode, inst_state, R, ox, oh, oz, vs, fx, fy, cx, cy, tmax,
              hits_t, hits_i):
    """Fill row v's pixels of the S-spaced grid that are not on the 2S-spaced grid filled before.

    Where every neighbouring 2S-grid pixel hit the same exposed face plane, intersect this pixel's ray with that plane
    and accept it if the voxel there is solid and its front neighbour empty; where every neighbour sees sky, so does
    this pixel; otherwise trace it. Exact except for geometry thinner than the sample spacing lying in front of a
    plane or against the sky (measured: ~0.01 % of pixels at a 4-pixel grid)."""
    H, W = hits_t.shape
    NX, NH, NZ = mat.shape
    o = np.empty(3)
    o[0] = ox
    o[1] = oh
    o[2] = oz
    nb = np.empty((4, 2), np.int64)
    S2 = 2 * S
    for u in range(0, W, S):
        if v % S2 == 0 and u % S2 == 0:
            continue
        k = 0
        if v % S2 == 0:
            nb[0, 0], nb[0, 1], nb[1, 0], nb[1, 1] = v, u - S, v, u + S
            k = 2
        elif u % S2 == 0:
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
                if t <= 0 or t > tmax or ph < 0 or ph >= NH or fh_ < 0 or fh_ >= NH:
                    ok = False
                elif not _solid(mat, inst, level, inst_mode, inst_state, px % NX, ph, pz % NZ) or \
                        _solid(mat, inst, level, inst_mode, inst_state, fx_ % NX, fh_, fz_ % NZ):
                    ok = False
                else:
                    hits_t[v, u] = t
                    hits_i[v, u, 0] = face
                    hits_i[v, u, 1] = px % NX
                    hits_i[v, u, 2] = ph
                    hits_i[v, u, 3] = pz % NZ
                    hits_i[v, u, 4] = plane
        if not ok:
            _trace_into(u, v, mat, inst, level, occ, bits, B, G, inst_mode, inst_state, R, ox, oh, oz, vs, fx, fy,
                        cx, cy, tmax, hits_t, hits_i)


@njit(cache=True, fastmath=True)
def _sample_row(v, sample, mat, inst, level, occ, bits, B, G, inst_mode, inst_state, R, ox, oh, oz, vs, fx, fy, cx, cy,
                tmax, hits_t, hits_i):
    for u in range(0, hits_t.shape[1], sample):
        _trace_into(u, v, mat, inst, level, occ, bits, B, G, inst_mode, inst_state, R, ox, oh, oz, vs, fx, fy, cx, cy,
                    tmax, hits_t, hits_i)


@njit(cache=True, fastmath=True)
def render_frame(mat, inst, level, occ, bits, B, G, palette, texkind, inst_mode, inst_state, inst_tint, R, ox, oh,
                 oz, vs, fx, fy, cx, cy, tmax, fog_start, sky_top, sky_horizon, clouds, rgb, depth, ids, sample=SAMPLE):
    """Render on one core (the benchmark's number). ``sample`` (a power of two) is the ray grid; 1 traces every
    pixel."""
    H, W = depth.shape
    hits_t = np.empty((H, W))
    hits_i = np.empty((H, W, 5), np.int64)
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
        _shade_row(v, mat, inst, palette, texkind, inst_tint, R, ox, oh, oz, vs, fx, fy, cx, cy, tmax, fog_start,
                   sky_top, sky_horizon, clouds, hits_t, hits_i, rgb, depth, ids)


@njit(cache=True, fastmath=True, parallel=True)
def render_frame_parallel(mat, inst, level, occ, bits, B, G, palette, texkind, inst_mode, inst_state, inst_tint, R,
                          ox, oh, oz, vs, fx, fy, cx, cy, tmax, fog_start, sky_top, sky_horizon, clouds, rgb, depth,
                          ids, sample=SAMPLE):
    """The same frame as :func:`render_frame`, rows spread over all numba threads."""
    H, W = depth.shape
    hits_t = np.empty((H, W))
    hits_i = np.empty((H, W, 5), np.int64)
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
        _shade_row(v, mat, inst, palette, texkind, inst_tint, R, ox, oh, oz, vs, fx, fy, cx, cy, tmax, fog_start,
                   sky_top, sky_horizon, clouds, hits_t, hits_i, rgb, depth, ids)
