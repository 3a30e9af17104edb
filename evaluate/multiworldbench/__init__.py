"""MultiWorldBench's evaluate home: the ten capabilities of two-view records, from records alone (docs/multiworldbench.md).

Every number says which **path** produced it:

- ``poses (classical)``: camera poses estimated from each player's video by the classical pose extractor of
  :mod:`.classical` (tracked corners, rotation-only vs essential-matrix model), cached per video in the run's feature
  cache; chained and compared with the commanded poses (control isolation, coordination fairness).
- ``measured``: a binary visual judgment measured from pixels, possible on Engine cases because the case says where
  everything must be: the expected world state (the game rules of :func:`~worldgate.trajectories.multiworldbench.world.replay`
  applied to the case's interactions) is ray cast from each player's commanded pose
  (:func:`~worldgate.trajectories.multiworldbench.world.cast_boxes`), which gives, per view and frame, the pixels where a block
  at the marked cross, a structure or the other player's avatar must appear; the video's pixels there are classified
  by chromaticity (shading-invariant) into the case's materials, the cross and the two avatar colours. Block present /
  count / material / location at the cross, structure silhouette and composition, avatar displacement, and colour
  histograms (style) are measured this way.
  The casts depend on the commanded inputs alone and are a cached feature of the record (:mod:`.projection`),
  as are the key frames' chromaticity classes before any threshold (:mod:`.chroma`): ``--rescore`` casts and
  classifies nothing, whatever thresholds it is given.
- ``vlm``: the same binary questions asked to a VLM judge with the prompts in ``prompts/multiworldbench/*.txt``. Used where
  pixels do not suffice (a record without Engine geometry) or when asked for (``judge=``); with no VLM backend
  configured the capability is reported **unavailable with the reason**, never filled in.

Capabilities (0-100, per case, then per run):

- **control isolation** (matched navigation, §4.1): per target role, channel and partner condition, the treatment
  trial against the role's two reference repetitions (partner idle), normalised by the reference path (floors 0.5 m,
  10 deg); ``100 min (1 - min(1, e))`` per case, the mean over cases; a commanded reference response at or below
  max(noise, response floor) scores 0; eligibility: the references' cnATE >= 0.6.
- **coordination fairness** (matched navigation, all cases): per matched action class, ``1 - C(a, b)`` of A's and B's
  responses to the same command; equal non-response scores 0; the mean over the case's classes.
- **cross-view motion**: ``100 q_observer q_actor``: the observer sees the actor's avatar move as commanded
  (measured: avatar pixels before/after, displacement or size change against the projected commanded positions); the
  actor's own view moves as commanded (measured: WorldMark's flow template of the key, classical flow).
- **state synchronization** (shared-state interaction): place = mean of success, count, location, material; destroy =
  mean of success, count, location; a question counts when **both** views answer it as the game state says
  (majority over the final frames).
- **state persistence**: strict product of the operator's and the returning observer's answers (all of them true).
- **structural consistency** (building reveal): per view, the structure matches the reference (silhouette IoU and
  material composition) at frames 80/100/120 (majority); ``100 min(view A, view B)``.
- **spatial reasoning**: ``100 min(A_pred, A_GT) / max(A_pred, A_GT)`` with A the revealed structure's area in
  pixels (measured vs ray cast), mean over views and frames; 0 unless both views revealed it (shared prerequisite).
- **race-condition consistency** (concurrent placement): ``100 1[sum over t in 60/80/100 of v_t a_t u_t >= 2]``:
  the block is visible in both views, both show the same material and it is one of the intended ones, and it is
  unique (one block, nothing beside it).
- **style consistency** (delayed revisit): ``100 (1 - JS)``, JS the base-2 Jensen-Shannon distance between the
  colour histograms of the two evidence frames (first observer; returning observer after the 70 idle frames with the
  landmark outside both views); 0 when the landmark is missing from one.
- **ID consistency**: the landmark is the same building in both evidence frames (measured against its ray cast);
  missing evidence fails (0, counted).

Tracks (the paper's three): navigation (control isolation, coordination fairness, cross-view motion), shared world
(synchronization, persistence, structural consistency, spatial reasoning, race condition), revisit (style, ID).
Overall: the mean of all ten. Zero rules: a missing video, an invisible cross (persistence), a missing reveal and
missing ID evidence score 0 and stay in the aggregate; coverage is reported per capability. A record counts only for
the capabilities of its own task: a missing or empty video is one ``zero_rule`` zero there (not a ``record error``,
not unavailable anywhere); any other record error (a truncated or undecodable video) is excluded there with the reason
``record error``. Both stay listed in ``results["errors"]`` (a zero-ruled entry says it was scored 0).
"""
