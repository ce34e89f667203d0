set terminal pngcairo size 900,600 font 'sans,10'
set output 'draft_time.png'
set title 'Draft time per speculative round by method (Avg over categories)'
set termoption noenhanced
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.7
set grid ytics
set ylabel 'ms per round'
set xlabel 'configuration'
set xtics rotate by -35 left
set yrange [0:*]
set key outside top right title 'part'
plot 'plots/draft_time.dat' using 2:xtic(1) title 'draft backbone', '' using 3 title 'draft LM head', '' using 4 title 'vocabulary update'
