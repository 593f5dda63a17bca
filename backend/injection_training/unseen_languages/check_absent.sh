#!/usr/bin/env bash
# Shows that the 12 languages of this folder occur nowhere in the training data or lexicons outside it.
# Run from the repository root: bash backend/injection_training/unseen_languages/check_absent.sh
# Searches backend/injection (lexicons, text normalisation, model card) and backend/injection_training
# (intent corpus, blind set, regression sets, benign generators, planting, sources) minus this folder, then the
# feature strings of the shipped model (backend/injection/model/weights.json.gz). Needs GNU grep with -P.
set -u
T=(backend/injection backend/injection_training --exclude-dir=unseen_languages)
echo "-- scripts: files containing any letter of the block"
for s in "uk Cyrillic \x{0400}-\x{04FF}" "el Greek \x{0370}-\x{03FF}\x{1F00}-\x{1FFF}" \
         "ko Hangul \x{1100}-\x{11FF}\x{3130}-\x{318F}\x{AC00}-\x{D7AF}" "th Thai \x{0E00}-\x{0E7F}" \
         "bn Bengali \x{0980}-\x{09FF}" "ka Georgian \x{10A0}-\x{10FF}\x{1C90}-\x{1CBF}" "ta Tamil \x{0B80}-\x{0BFF}"; do
  set -- $s; printf "%-3s %-9s " "$1" "$2"; grep -rPlI "[$3]" "${T[@]}" | tr '\n' ' '; echo
done
echo "-- common words: occurrences as a whole word (case-insensitive)"
declare -A W=(
 [uk]="що також будь ласка рахунок клієнт якщо оплату"
 [el]="και είναι παρακαλώ τιμολόγιο πελάτης εάν πληρωμή"
 [ko]="합니다 주세요 고객 송장 결제 경우 승인"
 [th]="ครับ ค่ะ ลูกค้า ใบแจ้งหนี้ อนุมัติ ถ้า ส่ง"
 [bn]="এবং করুন গ্রাহক চালান অনুমোদন যদি পাঠাও"
 [ka]="და არის თუ გთხოვთ ინვოისი კლიენტი გადახდა"
 [ta]="மற்றும் இந்த வாடிக்கையாளர் விலைப்பட்டியல் ஒப்புதல் அனுப்பு"
 [vi]="không của được khách hàng hóa đơn nếu duyệt"
 [id]="yang tidak untuk dengan pelanggan faktur jika setujui"
 [hu]="hogy nem számla ügyfél kérjük jóváhagyó ha küldd"
 [fi]="että ei lasku asiakas jos hyväksy lähetä kaikki"
 [sw]="kwa hii tafadhali ankara mteja kama idhinisha tuma"
)
for l in uk el ko th bn ka ta vi id hu fi sw; do
  printf "%-3s " "$l"; for w in ${W[$l]}; do printf "%s=%s " "$w" "$(grep -rwoiI "$w" "${T[@]}" | wc -l)"; done; echo
done
echo "-- language codes / Faker locales in the corpus, benign generators and lexicon"
grep -nE '"(uk|el|ko|th|bn|ka|ta|vi|id|hu|fi|sw)"\s*:|\b(uk_UA|el_GR|ko_KR|th_TH|bn_BD|ka_GE|ta_IN|vi_VN|id_ID|hu_HU|fi_FI|sw_KE|sw_TZ)\b' \
  backend/injection_training/*.py backend/injection/*.py || echo "none"
echo "-- language names"
grep -rniEI 'ukrain|greek|korean|hangul|thai\b|bengali|bangla|georgian|tamil|vietnam|indonesi|hungar|magyar|finnish|suomi|swahili' "${T[@]}" || echo "none"
echo "-- the shipped model's feature strings containing a letter of each script"
python3 - <<'PY'
import gzip, json
d = json.load(gzip.open("backend/injection/model/weights.json.gz"))
keys = [k for b in ("weights", "concept_weights", "lf_weights") if isinstance(d.get(b), dict) for k in d[b]]
for name, ranges in [("Cyrillic", [(0x400, 0x4FF)]), ("Greek", [(0x370, 0x3FF), (0x1F00, 0x1FFF)]),
                     ("Hangul", [(0x1100, 0x11FF), (0x3130, 0x318F), (0xAC00, 0xD7AF)]), ("Thai", [(0xE00, 0xE7F)]),
                     ("Bengali", [(0x980, 0x9FF)]), ("Georgian", [(0x10A0, 0x10FF), (0x1C90, 0x1CBF)]),
                     ("Tamil", [(0xB80, 0xBFF)])]:
    hits = [k for k in keys if any(lo <= ord(c) <= hi for c in k for lo, hi in ranges)]
    print(f"{name:9} {len(hits)} {hits[:6]}")
PY
